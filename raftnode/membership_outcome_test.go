package raftnode_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/testutil"
)

// configAnswerDropper forwards every RPC, but while armed it reports an
// AppendEntries that carries a configuration entry as failed after the
// follower stored it (the answer is lost), so the leader cannot learn
// that the entry reached a majority.
type configAnswerDropper struct {
	*raft.InmemTransport
	armed *atomic.Bool
}

// AppendEntriesPipeline is refused so every AppendEntries goes through
// AppendEntries below.
func (d *configAnswerDropper) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (d *configAnswerDropper) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := d.InmemTransport.AppendEntries(id, target, args, resp)
	if d.armed.Load() {
		for _, e := range args.Entries {
			if e.Type == raft.LogConfiguration {
				return errors.New("test: answer lost")
			}
		}
	}
	return err
}

// TestRemoveServerAfterLeadershipLossIsAnUnknownOutcome (audit T4-3): the
// leader's RemoveServer entry reaches every remaining follower, the leader is cut
// off before it learns so and steps down, and raft answers
// ErrLeadershipLost ("no way to guarantee whether the write succeeded").
// The next leader commits the removal. RemoveServer must answer an unknown
// outcome, never "not the leader" (nothing done), which the API would
// mark coordd-outcome: none.
func TestRemoveServerAfterLeadershipLossIsAnUnknownOutcome(t *testing.T) {
	testutil.Deadline(t, clusterTestDeadline)
	const n = 5
	var armed atomic.Bool
	var nodes []*raftnode.Node
	var trans []*raft.InmemTransport
	var peers []raftnode.Peer
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i)
		_, tr := raft.NewInmemTransport(raft.ServerAddress("inmem-" + id))
		trans = append(trans, tr)
		peers = append(peers, raftnode.Peer{ID: id, RaftAddr: "inmem-" + id})
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			if i != j {
				trans[i].Connect(trans[j].LocalAddr(), trans[j])
			}
		}
	}
	for i := 0; i < n; i++ {
		nd, err := raftnode.Open(raftnode.Config{ID: peers[i].ID, DataDir: t.TempDir(), RaftAddr: peers[i].RaftAddr,
			Transport: &configAnswerDropper{InmemTransport: trans[i], armed: &armed}, Logger: testLogger(t, peers[i].ID),
			LogStore: datadir.LogStoreBolt})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.Shutdown()
		}
	})
	for _, nd := range nodes {
		if err := nd.Bootstrap(peers); err != nil {
			t.Fatal(err)
		}
	}
	leader := -1
	waitFor(t, electTimeout, func() bool {
		for i, nd := range nodes {
			if nd.EstablishedTerm() != 0 {
				leader = i
				return true
			}
		}
		return false
	}, "a leader")
	x := nodes[leader]
	victim := peers[(leader+1)%n].ID

	armed.Store(true)
	errc := make(chan error, 1)
	go func() { errc <- x.RemoveServer(victim) }()
	// Every member that stays stores the entry. The removed one need not:
	// the leader stops replicating to it as soon as it appends the entry
	// (one last best-effort send), so a victim that lagged behind (a loaded
	// machine) may never hear of its removal.
	waitFor(t, opTimeout, func() bool {
		for i, nd := range nodes {
			if i == leader || peers[i].ID == victim {
				continue
			}
			f := nd.Raft().GetConfiguration()
			if f.Error() != nil || len(f.Configuration().Servers) != n-1 {
				return false
			}
		}
		return true
	}, "every remaining follower stores the configuration entry")
	// The leader is cut off before it hears of it.
	for i := range trans {
		if i != leader {
			trans[leader].Disconnect(trans[i].LocalAddr())
			trans[i].Disconnect(trans[leader].LocalAddr())
		}
	}
	armed.Store(false)
	var err error
	select {
	case err = <-errc:
	case <-time.After(opTimeout):
		t.Fatal("RemoveServer did not return")
	}
	var next *raftnode.Node
	waitFor(t, electTimeout, func() bool {
		for i, nd := range nodes {
			if i != leader && nd.EstablishedTerm() != 0 {
				next = nd
				return true
			}
		}
		return false
	}, "a new leader")
	var ids []string
	for _, s := range next.Raft().GetConfiguration().Configuration().Servers {
		ids = append(ids, string(s.ID))
	}
	if len(ids) != n-1 {
		t.Fatalf("the new leader %s holds configuration %v; the removal of %s should have committed", next.ID(), ids, victim)
	}
	if err == nil {
		return // the old leader learnt of the commit in time: a known outcome
	}
	if !errors.Is(err, raftnode.ErrOutcomeUnknown) || errors.Is(err, raftnode.ErrNotLeader) {
		t.Fatalf("RemoveServer(%s) answered %q, but the removal committed (configuration %v); want an unknown outcome",
			victim, err, ids)
	}
}
