package main

import (
	"flag"
	"time"

	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/vocab"
)

// channelFlags configure channel management (defaults in
// docs/semantics.md#defaults-and-limits).
type channelFlags struct {
	ClusterID            string
	PChannels            int
	PChannelPrefix       string
	NodeTTL              time.Duration
	BalanceInterval      time.Duration
	AllowRebalance       bool
	MinRebalanceInterval time.Duration
}

func (c *channelFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.ClusterID, "cluster-id", "by-dev", "this cluster's ID (replication configuration refers to it)")
	fs.IntVar(&c.PChannels, "pchannels", 16, "PChannels created at bootstrap (more are added if this grows; never removed)")
	fs.StringVar(&c.PChannelPrefix, "pchannel-prefix", "by-dev-rootcoord-dml", "PChannel name prefix: <prefix>_<i>")
	fs.DurationVar(&c.NodeTTL, "node-ttl", 10*time.Second, "a streaming node silent this long is marked DOWN and its PChannels move to an UP node (none UP: they wait for one); writes to them wait up to this long after it stops")
	fs.DurationVar(&c.BalanceInterval, "balance-interval", time.Minute, "periodic balance round interval")
	fs.BoolVar(&c.AllowRebalance, "allow-rebalance", true, "move healthy channels to even out load (false: only place lost ones)")
	fs.DurationVar(&c.MinRebalanceInterval, "min-rebalance-interval", 5*time.Minute, "a channel assigned more recently is not moved by rebalancing")
}

func (c channelFlags) validate() error {
	if err := vocab.ValidateClusterID(c.ClusterID); err != nil {
		return badConfig("--cluster-id: %s", err)
	}
	if err := vocab.ValidatePrefix(c.PChannelPrefix); err != nil {
		return badConfig("--pchannel-prefix: %s", err)
	}
	if c.PChannels < 1 || c.PChannels > 65536 {
		return badConfig("--pchannels must be in 1..65536, got %d", c.PChannels)
	}
	if c.NodeTTL < 100*time.Millisecond {
		return badConfig("--node-ttl must be at least 100ms, got %v", c.NodeTTL)
	}
	if c.BalanceInterval < time.Second {
		return badConfig("--balance-interval must be at least 1s, got %v", c.BalanceInterval)
	}
	if c.MinRebalanceInterval < 0 {
		return badConfig("--min-rebalance-interval must not be negative")
	}
	return nil
}

func (c channelFlags) balancerConfig() balancer.Config {
	pc := policy.DefaultConfig()
	pc.AllowRebalance = c.AllowRebalance
	pc.MinRebalanceInterval = c.MinRebalanceInterval
	return balancer.Config{
		ClusterID: c.ClusterID, PChannelPrefix: c.PChannelPrefix, PChannels: c.PChannels,
		Interval: c.BalanceInterval, Policy: pc,
	}
}
