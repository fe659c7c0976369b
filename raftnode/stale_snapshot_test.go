package raftnode_test

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/testutil"
)

// snapshotHolder is the leader's transport: once armed, it holds the next
// InstallSnapshot raft sends to target until the test releases it, as a
// slow connection, a fault proxy or a replication goroutine's backoff does.
type snapshotHolder struct {
	*raft.InmemTransport
	target raft.ServerAddress

	mu    sync.Mutex
	armed bool

	held    chan uint64 // the held snapshot's index
	release chan struct{}
	result  chan error // what delivering the held snapshot returned
}

func newSnapshotHolder(tr *raft.InmemTransport, target raft.ServerAddress) *snapshotHolder {
	return &snapshotHolder{InmemTransport: tr, target: target,
		held: make(chan uint64, 1), release: make(chan struct{}), result: make(chan error, 1)}
}

func (h *snapshotHolder) arm() {
	h.mu.Lock()
	h.armed = true
	h.mu.Unlock()
}

func (h *snapshotHolder) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	h.mu.Lock()
	hold := h.armed && target == h.target
	h.armed = h.armed && !hold
	h.mu.Unlock()
	if !hold {
		return h.InmemTransport.InstallSnapshot(id, target, args, resp, data)
	}
	// Read it now: the leader reaps the snapshot's files long before the
	// request is delivered.
	buf, err := io.ReadAll(data)
	if err != nil {
		return err
	}
	h.held <- args.LastLogIndex
	<-h.release
	err = h.InmemTransport.InstallSnapshot(id, target, args, resp, bytes.NewReader(buf))
	h.result <- err
	return err
}

// TestStaleSnapshotAfterReplacement replays the replacement of a member
// that lost its disk (track record row 2 of jepsen-style-tests/README.md):
// the leader's replication goroutine for the old member still holds an
// InstallSnapshot of an older snapshot when the member is removed, and
// hashicorp/raft lets that goroutine finish after RemoveServer, to the same
// address, where the replacement now listens. The replacement has installed
// the leader's newer snapshot from its own replication goroutine, so its log
// starts after that one. Installing the stale snapshot set raft's
// lastApplied back to the older index, and the next commit made processLogs
// read entries the replacement never had: "panic: log not found". A member
// must refuse a snapshot older than what it has applied.
//
// It runs on both log stores.
func TestStaleSnapshotAfterReplacement(t *testing.T) {
	for _, store := range []string{datadir.LogStoreBolt, datadir.LogStoreWAL} {
		t.Run(store, func(t *testing.T) { staleSnapshotAfterReplacement(t, store) })
	}
}

func staleSnapshotAfterReplacement(t *testing.T, store string) {
	testutil.Deadline(t, clusterTestDeadline)
	addr := func(id string) raft.ServerAddress { return raft.ServerAddress("inmem-" + id) }
	// The data dirs are made before the Cleanup below, so removed after it.
	dirs := map[string]string{"n1": t.TempDir(), "n2": t.TempDir(), "n3": t.TempDir(), "n3-replacement": t.TempDir()}
	cfg := func(id, dir string, tr raft.Transport) raftnode.Config {
		return raftnode.Config{ID: id, DataDir: dirs[dir], RaftAddr: string(addr(id)), Transport: tr,
			Logger: testLogger(t, id),
			// Snapshots only when the test takes them; a short log behind them.
			SnapshotInterval: time.Hour, SnapshotThreshold: 1 << 20, TrailingLogs: 2,
			// The log is compacted to TrailingLogs (raft-wal: logically, its
			// segments are small), so the stopped member needs a snapshot.
			LogStore: store, WALSegmentSize: walSegmentSize,
			// n1 must lead throughout (the holder is its transport), also on
			// a loaded machine.
			HeartbeatTimeout: time.Second, ElectionTimeout: time.Second, LeaderLeaseTimeout: time.Second}
	}
	var nodes []*raftnode.Node
	t.Cleanup(func() {
		for _, n := range nodes {
			n.Shutdown()
		}
	})
	open := func(c raftnode.Config) *raftnode.Node {
		t.Helper()
		n, err := raftnode.Open(c)
		if err != nil {
			t.Fatalf("open %s: %v", c.ID, err)
		}
		nodes = append(nodes, n)
		return n
	}
	connect := func(a, b *raft.InmemTransport) {
		a.Connect(b.LocalAddr(), b)
		b.Connect(a.LocalAddr(), a)
	}

	_, t1 := raft.NewInmemTransport(addr("n1"))
	_, t2 := raft.NewInmemTransport(addr("n2"))
	_, t3 := raft.NewInmemTransport(addr("n3"))
	holder := newSnapshotHolder(t1, addr("n3"))
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(holder.release) }) }
	t.Cleanup(release) // before the nodes shut down: raft waits for the held goroutine

	n1 := open(cfg("n1", "n1", holder))
	n2 := open(cfg("n2", "n2", t2))
	n3 := open(cfg("n3", "n3", t3))
	connect(t1, t2)
	connect(t1, t3)
	connect(t2, t3)
	if err := n1.Bootstrap([]raftnode.Peer{{ID: "n1", RaftAddr: string(addr("n1"))}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, electTimeout, func() bool { return n1.EstablishedTerm() != 0 }, "n1 to lead")
	for _, n := range []*raftnode.Node{n2, n3} {
		if err := n1.AddVoter(n.ID(), n.RaftAddr()); err != nil {
			t.Fatal(err)
		}
	}
	writeEntries(t, n1, "before", 5)
	waitApplied := func(n *raftnode.Node, index uint64) {
		t.Helper()
		waitFor(t, opTimeout, func() bool { return n.Raft().AppliedIndex() >= index }, "%s to apply index %d", n.ID(), index)
	}
	waitApplied(n3, n1.Raft().LastIndex())

	// n3 loses its disk: the leader goes on without it and compacts past
	// what n3 has, so its replication goroutine for n3 turns to a snapshot,
	// which the holder keeps.
	holder.arm()
	t1.Disconnect(addr("n3"))
	t2.Disconnect(addr("n3"))
	if err := n3.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		writeEntries(t, n1, "while-gone", 10)
		if err := n1.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	var stale uint64
	select {
	case stale = <-holder.held:
	case <-time.After(testutil.Timeout(opTimeout)):
		t.Fatal("the leader never sent the stopped n3 a snapshot")
	}

	// The replacement: remove n3, newer entries and a newer snapshot, then
	// n3 again on an empty data dir at the same address.
	if err := n1.RemoveServer("n3"); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n1, "after-remove", 10)
	if err := n1.Snapshot(); err != nil {
		t.Fatal(err)
	}
	newest, _, _ := n1.LastSnapshot()
	if newest <= stale {
		t.Fatalf("precondition: the leader's newest snapshot (%d) is not newer than the held one (%d)", newest, stale)
	}
	_, t3b := raft.NewInmemTransport(addr("n3"))
	n3b := open(cfg("n3", "n3-replacement", t3b))
	connect(t1, t3b)
	connect(t2, t3b)
	if err := n1.AddVoter("n3", string(addr("n3"))); err != nil {
		t.Fatal(err)
	}
	writeEntries(t, n1, "joined", 5)
	waitApplied(n3b, n1.Raft().LastIndex())
	applied := n3b.Raft().AppliedIndex()
	state := n3b.State().AppliedIndex()

	// The old goroutine's snapshot reaches the replacement.
	release()
	var err error
	select {
	case err = <-holder.result:
	case <-time.After(testutil.Timeout(opTimeout)):
		t.Fatal("the held snapshot was never answered")
	}
	if got := n3b.Raft().AppliedIndex(); got < applied {
		t.Fatalf("the replacement installed the stale snapshot at %d (raft applied index %d -> %d, delivery error %v): "+
			"its log starts after the snapshot at %d, so the next commit panics in processLogs (log not found)",
			stale, applied, got, err, newest)
	}
	if got := n3b.State().AppliedIndex(); got < state {
		t.Fatalf("the replacement's state went back from index %d to %d", state, got)
	}
	var refused *raftnode.StaleSnapshotError
	if !errors.As(err, &refused) || refused.Index != stale || refused.Applied < applied {
		t.Fatalf("the stale snapshot at %d was answered with %v, want a StaleSnapshotError at applied index >= %d", stale, err, applied)
	}
	// The old goroutine's last attempt after RemoveServer may send the
	// leader's newest snapshot, also older than the replacement's state.
	if got := n3b.RefusedSnapshots(); got == 0 {
		t.Fatal("the replacement counts no refused snapshot")
	}

	// The replacement goes on applying.
	writeEntries(t, n1, "after-stale", 5)
	waitApplied(n3b, n1.Raft().LastIndex())
}
