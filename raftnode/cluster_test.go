package raftnode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/testutil"
)

// TestMain fails the package if any goroutine (raft, transports, batchers,
// leader routines, test workers) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Every wait in these tests is bounded by one of these.
const (
	electTimeout = 10 * time.Second // a leader is elected and established
	opTimeout    = 10 * time.Second // one operation, retries included
	// clusterTestDeadline bounds a whole test that uses newCluster.
	clusterTestDeadline = 90 * time.Second
)

// testCluster is N in-process nodes joined by raft in-memory transports.
// A node can be partitioned (isolate/heal), stopped and restarted on the
// same data directory. All nodes are shut down by t.Cleanup.
type testCluster struct {
	t     testing.TB
	cfgs  []raftnode.Config
	peers []raftnode.Peer
	setup func(i int, n *raftnode.Node)

	// unknownOutcomes counts proposeRetry attempts that ended with
	// ErrOutcomeUnknown (the retry then goes through the dedup table).
	unknownOutcomes atomic.Int64

	mu       sync.Mutex
	nodes    []*raftnode.Node // nil while stopped
	trans    []*raft.InmemTransport
	isolated []bool
}

type clusterOption func(*testCluster)

// withConfig adjusts node i's configuration before it is opened.
func withConfig(f func(i int, cfg *raftnode.Config)) clusterOption {
	return func(c *testCluster) {
		for i := range c.cfgs {
			f(i, &c.cfgs[i])
		}
	}
}

// withSetup runs f on every node after Open and before Bootstrap (and on
// restarts), e.g. to register leader routines.
func withSetup(f func(i int, n *raftnode.Node)) clusterOption {
	return func(c *testCluster) { c.setup = f }
}

// newCluster opens n nodes, connects them all-to-all and bootstraps them
// with the same peer list.
func newCluster(t testing.TB, n int, opts ...clusterOption) *testCluster {
	t.Helper()
	// A wedged raft or batcher must fail the test, not eat go test's
	// timeout: each cluster test takes a few seconds when it passes.
	testutil.Deadline(t, clusterTestDeadline)
	c := &testCluster{
		t:        t,
		nodes:    make([]*raftnode.Node, n),
		trans:    make([]*raft.InmemTransport, n),
		isolated: make([]bool, n),
	}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("n%d", i)
		c.cfgs = append(c.cfgs, raftnode.Config{
			ID:       id,
			DataDir:  t.TempDir(), // created before the Cleanup below, so removed after it
			RaftAddr: "inmem-" + id,
			Logger:   testLogger(t, id),
			// These tests read raft.db and count snapshot installs, which
			// raft-wal (compacting whole 64 MiB segments) rarely needs;
			// the raft-wal tests ask for it with withConfig.
			LogStore: datadir.LogStoreBolt,
		})
		c.peers = append(c.peers, raftnode.Peer{ID: id, RaftAddr: "inmem-" + id})
	}
	for _, o := range opts {
		o(c)
	}
	t.Cleanup(c.shutdownAll)
	for i := 0; i < n; i++ {
		c.open(i)
	}
	for i := 0; i < n; i++ {
		if has, err := c.node(i).HasExistingState(); err != nil || has {
			t.Fatalf("fresh node %d: HasExistingState = %v, %v; want false", i, has, err)
		}
	}
	for i := 0; i < n; i++ {
		if err := c.node(i).Bootstrap(c.peers); err != nil {
			t.Fatalf("bootstrap node %d: %v", i, err)
		}
	}
	return c
}

// testLogger is silent unless RAFTNODE_TEST_LOG is set.
func testLogger(t testing.TB, id string) hclog.Logger {
	if os.Getenv("RAFTNODE_TEST_LOG") == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Name: t.Name() + "/" + id, Level: hclog.Debug, Output: os.Stderr})
}

// open starts node i on its data directory with a fresh transport at its
// address and connects it to every running, non-isolated node.
func (c *testCluster) open(i int) *raftnode.Node {
	c.t.Helper()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(c.cfgs[i].RaftAddr))
	cfg := c.cfgs[i]
	cfg.Transport = tr
	n, err := raftnode.Open(cfg)
	if err != nil {
		c.t.Fatalf("open node %d: %v", i, err)
	}
	if c.setup != nil {
		c.setup(i, n)
	}
	c.mu.Lock()
	c.nodes[i], c.trans[i], c.isolated[i] = n, tr, false
	c.mu.Unlock()
	c.reconnect()
	return n
}

// reconnect rebuilds the routing table: every running, non-isolated pair is
// connected in both directions; everything else is disconnected.
func (c *testCluster) reconnect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, ti := range c.trans {
		if ti == nil {
			continue
		}
		for j, tj := range c.trans {
			if i == j {
				continue
			}
			addr := raft.ServerAddress(c.cfgs[j].RaftAddr)
			if tj != nil && c.nodes[i] != nil && c.nodes[j] != nil && !c.isolated[i] && !c.isolated[j] {
				ti.Connect(addr, tj)
			} else {
				ti.Disconnect(addr)
			}
		}
	}
}

// isolate cuts node i off from every other node, in both directions.
func (c *testCluster) isolate(i int) {
	c.mu.Lock()
	c.isolated[i] = true
	c.mu.Unlock()
	c.reconnect()
}

// heal reconnects an isolated node.
func (c *testCluster) heal(i int) {
	c.mu.Lock()
	c.isolated[i] = false
	c.mu.Unlock()
	c.reconnect()
}

// stop isolates node i and shuts it down; its data directory is kept.
func (c *testCluster) stop(i int) {
	c.t.Helper()
	c.isolate(i)
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.Shutdown(); err != nil {
		c.t.Errorf("shutdown node %d: %v", i, err)
	}
	c.reconnect()
}

func (c *testCluster) shutdownAll() {
	for i := range c.cfgs {
		c.stop(i)
	}
}

// node returns node i, or nil while it is stopped.
func (c *testCluster) node(i int) *raftnode.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// leaderNow returns the running node with the highest established term
// among those not excluded, or -1. Partitioned nodes are included: a deposed
// leader may still believe it leads, which is what the tests probe.
func (c *testCluster) leaderNow(exclude ...int) int {
	best, bestTerm := -1, uint64(0)
	for i := range c.cfgs {
		if contains(exclude, i) {
			continue
		}
		n := c.node(i)
		if n == nil || !n.IsLeader() {
			continue
		}
		if term := n.EstablishedTerm(); term > bestTerm {
			best, bestTerm = i, term
		}
	}
	return best
}

// waitLeader waits until a node other than those excluded is an
// established leader and returns its index.
func (c *testCluster) waitLeader(exclude ...int) int {
	c.t.Helper()
	var leader int
	waitFor(c.t, electTimeout, func() bool {
		leader = c.leaderNow(exclude...)
		return leader >= 0
	}, "an established leader (excluding %v)", exclude)
	return leader
}

// retryable reports whether a Propose error means "try again, possibly on
// another node, with the same request ID".
func retryable(err error) bool {
	return errors.Is(err, raftnode.ErrNotLeader) || errors.Is(err, raftnode.ErrOutcomeUnknown) ||
		errors.Is(err, raftnode.ErrNotEstablished) || errors.Is(err, raftnode.ErrShuttingDown)
}

// proposeRetry proposes body with requestID on whichever node currently
// leads (excluding some), retrying retryable errors with the same request
// ID until it is acknowledged or ctx ends. It returns the acknowledged
// result and how many attempts it took.
func (c *testCluster) proposeRetry(ctx context.Context, body proto.Message, requestID string, exclude ...int) (*logpb.Result, int, error) {
	for attempt := 1; ; attempt++ {
		if i := c.leaderNow(exclude...); i >= 0 {
			if n := c.node(i); n != nil {
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				res, err := propose(actx, n, body, requestID)
				cancel()
				if err == nil {
					return res, attempt, nil
				}
				if errors.Is(err, raftnode.ErrOutcomeUnknown) {
					c.unknownOutcomes.Add(1)
				}
				if !retryable(err) {
					return nil, attempt, fmt.Errorf("propose %s on n%d: %w", requestID, i, err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, attempt, fmt.Errorf("propose %s: gave up after %d attempts: %w", requestID, attempt, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// writeOnLeader commits k small entries (the mix writeEntries uses) on
// whichever member leads, never one of exclude, retrying across elections.
func (c *testCluster) writeOnLeader(prefix string, k int, exclude ...int) {
	c.t.Helper()
	for j := 0; j < k; j++ {
		var body proto.Message = &logpb.ReserveIDs{Count: uint64(1 + j%3)}
		if j%4 == 3 {
			body = &logpb.UpsertMember{Member: &logpb.Member{
				Id: fmt.Sprintf("m%d", j%7), RaftAddr: "127.0.0.1:" + strconv.Itoa(7000+j)}}
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		_, _, err := c.proposeRetry(ctx, body, fmt.Sprintf("%s-%d", prefix, j), exclude...)
		cancel()
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// propose builds a command with commands.New and proposes it on n.
func propose(ctx context.Context, n *raftnode.Node, body proto.Message, requestID string, opts ...commands.Option) (*logpb.Result, error) {
	c, err := commands.New(body, requestID)
	if err != nil {
		return nil, err
	}
	return n.Propose(ctx, c, opts...)
}

// mustPropose proposes on node i and fails the test on any error.
func mustPropose(t *testing.T, n *raftnode.Node, body proto.Message, requestID string) *logpb.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	res, err := propose(ctx, n, body, requestID)
	if err != nil {
		t.Fatalf("propose %s on %s: %v", requestID, n.ID(), err)
	}
	if res.Rejection != nil {
		t.Fatalf("propose %s on %s: rejected: %v", requestID, n.ID(), res.Rejection)
	}
	return res
}

// linearizableRead reads on node n, failing the test on error.
func linearizableRead(t *testing.T, n *raftnode.Node) *fsm.State {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	st, err := n.LinearizableRead(ctx)
	if err != nil {
		t.Fatalf("linearizable read on %s: %v", n.ID(), err)
	}
	return st
}

// snapshotBytes serializes a state the way raft snapshots do.
func snapshotBytes(t testing.TB, st *fsm.State) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := st.WriteSnapshot(&buf); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	return buf.Bytes()
}

// waitConverged waits until the given nodes have applied everything the
// current leader has committed, then checks that their states are
// byte-identical. It returns the common state.
func (c *testCluster) waitConverged(nodes ...int) *fsm.State {
	c.t.Helper()
	var leader int
	var target *fsm.State
	waitFor(c.t, opTimeout, func() bool {
		leader = c.waitLeader()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.node(leader).LinearizableRead(ctx)
		if err != nil {
			return false // leadership moved; pick the new leader
		}
		target = st
		return true
	}, "a linearizable read on the leader")
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	for _, i := range nodes {
		if err := c.node(i).WaitApplied(ctx, target.AppliedIndex()); err != nil {
			c.t.Fatalf("n%d: wait for index %d: %v", i, target.AppliedIndex(), err)
		}
	}
	// All nodes reached the target; a later entry may still be in flight,
	// so wait until they are at the same index, then they must be equal.
	var states []*fsm.State
	waitFor(c.t, opTimeout, func() bool {
		states = states[:0]
		for _, i := range nodes {
			states = append(states, c.node(i).State())
		}
		for _, st := range states[1:] {
			if st.AppliedIndex() != states[0].AppliedIndex() {
				return false
			}
		}
		return true
	}, "nodes %v at the same applied index", nodes)
	want := snapshotBytes(c.t, states[0])
	for k, st := range states[1:] {
		if got := snapshotBytes(c.t, st); !bytes.Equal(got, want) {
			c.t.Fatalf("n%d and n%d applied up to %d but their snapshots differ (%d vs %d bytes)",
				nodes[0], nodes[k+1], st.AppliedIndex(), len(want), len(got))
		}
	}
	return states[0]
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	testutil.EventuallyWithin(t, timeout, fmt.Sprintf(format, args...), cond)
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// idRange extracts the ID range of a ReserveIDs result.
func idRange(t *testing.T, res *logpb.Result) (first, count uint64) {
	t.Helper()
	r := res.GetIdRange()
	if res.Rejection != nil || r == nil {
		t.Fatalf("ReserveIDs result %v has no ID range", res)
	}
	return r.First, r.Count
}

// transferLeadership asks n to hand leadership to target (any member when
// target is nil), again while the attempt failed with n still leading:
// under load, catching the target up can outlast raft's transfer timeout
// (one election timeout). It returns the last error if n never let go.
func transferLeadership(n, target *raftnode.Node) error {
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		if target == nil {
			err = n.TransferLeadership("", "")
		} else {
			err = n.TransferLeadership(target.ID(), target.RaftAddr())
		}
		if err == nil || !n.IsLeader() {
			return nil
		}
	}
	return err
}
