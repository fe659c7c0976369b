package raftnode_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// TestTuningKnobs: Config.BoltOptions is applied to raft.db on every
// member, LogWrites counts the leader's log writes (at least one per entry
// committed one by one), and with MaxInflightEntries 1 the batcher never
// has more than one entry with raft while proposals pile up.
func TestTuningKnobs(t *testing.T) {
	var opened atomic.Int32
	c := newCluster(t, 3, withConfig(func(_ int, cfg *raftnode.Config) {
		cfg.MaxInflightEntries = 1
		cfg.BoltOptions = func(o *bolt.Options) {
			o.NoFreelistSync = true
			opened.Add(1)
		}
	}))
	if got := opened.Load(); got != 3 {
		t.Fatalf("BoltOptions applied %d times, want once per member (3)", got)
	}
	leader := c.node(c.waitLeader())
	before := leader.LogWrites()
	for i := 0; i < 5; i++ {
		mustPropose(t, leader, &logpb.ReserveIDs{Count: 1}, "")
	}
	if got := leader.LogWrites() - before; got < 5 {
		t.Fatalf("5 entries committed one by one, LogWrites grew by %d", got)
	}
	var wg sync.WaitGroup
	var maxInflight atomic.Int64
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if n := int64(leader.ProposalQueue().Inflight); n > maxInflight.Load() {
				maxInflight.Store(n)
			}
		}
	}()
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if _, err := propose(context.Background(), leader, &logpb.ReserveIDs{Count: 1}, ""); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if got := maxInflight.Load(); got != 1 {
		t.Fatalf("with MaxInflightEntries 1 the batcher had up to %d entries in flight", got)
	}
}
