package raftnode_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// BenchmarkCommittedWrite is a committed write through a 3-member
// in-process cluster (in-memory transport, BoltDB logs on disk with
// fsync): 64 concurrent proposers on the leader, each proposal an ~80 B
// member upsert committed by a quorum and applied. It reports commits/s and
// how many commands each log entry carried (the batcher's group commit),
// for the raft settings that bear on it. Run with -benchtime=Nx (N of a few
// thousand); the figures are in bench/RESULTS.md.
func BenchmarkCommittedWrite(b *testing.B) {
	cases := []struct {
		name string
		cfg  func(*raftnode.Config)
	}{
		{"default", func(*raftnode.Config) {}},
		{"bolt-freelist-synced-array", func(c *raftnode.Config) {
			c.BoltOptions = func(o *bolt.Options) { o.NoFreelistSync, o.FreelistType = false, bolt.FreelistArrayType }
		}},
		{"wal", func(c *raftnode.Config) { c.LogStore = datadir.LogStoreWAL }},
		{"MaxAppendEntries=16", func(c *raftnode.Config) { c.MaxAppendEntries = 16 }},
		{"MaxAppendEntries=1024", func(c *raftnode.Config) { c.MaxAppendEntries = 1024 }},
		{"NoFreelistSync", func(c *raftnode.Config) { c.BoltOptions = func(o *bolt.Options) { o.NoFreelistSync = true } }},
		{"NoFreelistSync+map", func(c *raftnode.Config) {
			c.BoltOptions = func(o *bolt.Options) { o.NoFreelistSync, o.FreelistType = true, bolt.FreelistMapType }
		}},
		{"MaxInflightEntries=2", func(c *raftnode.Config) { c.MaxInflightEntries = 2 }},
		{"MaxInflightEntries=4", func(c *raftnode.Config) { c.MaxInflightEntries = 4 }},
		{"MaxInflightEntries=16", func(c *raftnode.Config) { c.MaxInflightEntries = 16 }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := newCluster(b, 3, withConfig(func(_ int, cfg *raftnode.Config) { tc.cfg(cfg) }))
			c.waitLeader()
			benchWrites(b, c, 64)
		})
	}
}

// benchWrites commits b.N member upserts from `clients` goroutines on the
// leader and reports commits/s, p50/p99 latency, commands per log entry and
// per fsync (log writes averaged over the members), and how many proposals
// failed because leadership moved (a loaded machine can cost an election;
// the proposer then goes on with the new leader).
func benchWrites(b *testing.B, c *testCluster, clients int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lastIndex, logWrites := func() (last uint64) {
		for i := range c.cfgs {
			v, _ := strconv.ParseUint(c.node(i).Raft().Stats()["last_log_index"], 10, 64)
			last = max(last, v)
		}
		return last
	}, func() (sum uint64) {
		for i := range c.cfgs {
			sum += c.node(i).LogWrites()
		}
		return sum
	}
	var next, lost atomic.Int64
	lat := make([][]time.Duration, clients)
	done := make(chan struct{}, clients)
	first, writes := lastIndex(), logWrites()
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < clients; w++ {
		go func(w int) {
			defer func() { done <- struct{}{} }()
			leader := c.node(c.leaderNow())
			for {
				i := next.Add(1)
				if i > int64(b.N) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				_, err := propose(ctx, leader, &logpb.UpsertMember{Member: &logpb.Member{
					Id: fmt.Sprintf("m%d", w), RaftAddr: "127.0.0.1:" + strconv.Itoa(7000+w), GrpcAddr: "127.0.0.1:" + strconv.Itoa(int(9000+i%1000))}}, "")
				if err != nil {
					lost.Add(1)
					for leader = nil; leader == nil && ctx.Err() == nil; time.Sleep(5 * time.Millisecond) {
						if l := c.leaderNow(); l >= 0 {
							leader = c.node(l)
						}
					}
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}(w)
	}
	for w := 0; w < clients; w++ {
		<-done
	}
	took := time.Since(start)
	b.StopTimer()
	if ctx.Err() != nil {
		b.Fatal("writes did not finish in time")
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) == 0 {
		b.Fatalf("no proposal committed (%d failed)", lost.Load())
	}
	slices.Sort(all)
	entries, fsyncs := lastIndex()-first, float64(logWrites()-writes)/float64(len(c.cfgs))
	b.ReportMetric(float64(len(all))/took.Seconds(), "commits/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lost.Load()), "failed-proposals")
	if entries > 0 {
		b.ReportMetric(float64(len(all))/float64(entries), "commands/entry")
	}
	if fsyncs > 0 {
		b.ReportMetric(float64(len(all))/fsyncs, "commands/fsync")
	}
}
