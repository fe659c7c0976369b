package policy

import (
	"fmt"
	"math"
	"time"
)

// MaxRebalanceMaxStep is the largest RebalanceMaxStep Validate accepts.
const MaxRebalanceMaxStep = 8

// Config holds the balance policy parameters (Milvus's
// streaming.walBalancer.balancePolicy.*; docs/semantics.md#balance-policy).
type Config struct {
	// vchannelFair weights and rebalance tolerance
	// (defaults 0.4, 0.3, 0.01, 0.01).
	PChannelWeight, VChannelWeight, AntiAffinityWeight, RebalanceTolerance float64
	// RebalanceMaxStep is the most channels one round may move off healthy
	// nodes (the DFS depth), default 3.
	RebalanceMaxStep int
	// AllowRebalance false means only channels without a healthy placement
	// are placed; nothing on a healthy node is moved. Default true.
	AllowRebalance bool
	// MinRebalanceInterval: a channel ASSIGNED less than this long ago is not
	// moved by rebalance. Default 5m.
	MinRebalanceInterval time.Duration
}

// DefaultConfig returns the Milvus defaults.
func DefaultConfig() Config {
	return Config{
		PChannelWeight:       0.4,
		VChannelWeight:       0.3,
		AntiAffinityWeight:   0.01,
		RebalanceTolerance:   0.01,
		RebalanceMaxStep:     3,
		AllowRebalance:       true,
		MinRebalanceInterval: 5 * time.Minute,
	}
}

// Validate rejects negative, NaN or infinite weights and tolerance, a
// RebalanceMaxStep outside [0, MaxRebalanceMaxStep] and a negative
// MinRebalanceInterval.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"pchannel weight", c.PChannelWeight},
		{"vchannel weight", c.VChannelWeight},
		{"anti-affinity weight", c.AntiAffinityWeight},
		{"rebalance tolerance", c.RebalanceTolerance},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("balance policy: %s must be a finite non-negative number, got %v", f.name, f.v)
		}
	}
	if c.RebalanceMaxStep < 0 || c.RebalanceMaxStep > MaxRebalanceMaxStep {
		return fmt.Errorf("balance policy: rebalance max step must be in [0, %d], got %d", MaxRebalanceMaxStep, c.RebalanceMaxStep)
	}
	if c.MinRebalanceInterval < 0 {
		return fmt.Errorf("balance policy: min rebalance interval must not be negative, got %v", c.MinRebalanceInterval)
	}
	return nil
}
