package streamingnode

import (
	"context"
	"errors"
	"math"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/testutil"
)

// shortConfirm keeps the wait for a confirmation short in tests that
// expect a refusal.
func shortConfirm(c *Config) { c.ConfirmTimeout = 200 * time.Millisecond }

// forgedAssign sends an Assign with this node's identity but terms coordd
// never decided.
func (n *testNode) forgedAssign(p string, term int64, coordTerm uint64) error {
	id, epoch := n.Session()
	_, err := n.cl.Assign(context.Background(), &coordpb.AssignRequest{Pchannel: p, Term: term, AccessMode: "RW",
		CoordTerm: coordTerm, NodeId: id, Epoch: epoch})
	return err
}

// TestForgedTermsAreRefused: one Assign with a huge coordinator term and
// PChannel term (which coordd never reported) is refused, raises neither
// the node's coordinator fence nor the durable WAL fence, and the real
// coordinator's assignment and appends keep working.
func TestForgedTermsAreRefused(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), shortConfirm)
	testutil.Eventually(t, "coord term from heartbeat", func() bool { return n.Status().MaxCoordTerm == 3 })

	wantErr(t, n.forgedAssign(pch, 1<<62, math.MaxInt64), codes.Unavailable, "coordinator term 9223372036854775807 is not confirmed by coordd")
	// The real coordinator term with a PChannel term coordd never assigned.
	wantErr(t, n.forgedAssign(pch, 1<<62, 3), codes.Unavailable, "pchannel dml_0 term 4611686018427387904 is not confirmed")
	if st := n.Status(); st.MaxCoordTerm != 3 || len(st.Wals) != 0 {
		t.Fatalf("after forged assigns: status %v", st)
	}
	if _, err := os.Stat(n.cfg.WALDir + "/" + pch + "/fence"); !errors.Is(err, os.ErrNotExist) {
		fence, _ := wal.ReadFence(n.cfg.WALDir, pch)
		t.Fatalf("the forged assign wrote the WAL fence: %d (%v)", fence, err)
	}
	// A forged Remove with a huge term cannot poison later assigns either.
	id, epoch := n.Session()
	_, err := n.cl.Remove(context.Background(), &coordpb.RemoveRequest{Pchannel: pch, Term: 1 << 62, CoordTerm: 3, NodeId: id, Epoch: epoch})
	wantErr(t, err, codes.Unavailable, "not confirmed by coordd's assignment view")

	// The real coordinator (term 3) still assigns and appends.
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatalf("real assign after the forged ones: %v", err)
	}
	r := n.mustAppend(t, vch, 2, "after")
	if r.Id.Term != 2 {
		t.Fatalf("append %v", r)
	}
	if fence, _ := wal.ReadFence(n.cfg.WALDir, pch); fence != 2 {
		t.Fatalf("fence %d, want 2", fence)
	}
	// Coordinator appends are fenced by confirmed terms too.
	_, err = n.cl.Append(context.Background(), &coordpb.AppendRequest{Vchannel: vch, Term: 2, Payload: []byte("x"), BroadcastId: 5,
		CoordTerm: math.MaxUint64, NodeId: id, Epoch: epoch})
	wantErr(t, err, codes.Unavailable, "not confirmed by coordd")
	if st := n.Status(); st.MaxCoordTerm != 3 {
		t.Fatalf("max coord term %d after a forged append", st.MaxCoordTerm)
	}
}

// TestNewCoordinatorTermIsConfirmedByAskingCoordd: a new leader's first
// Assign reaches the node before any heartbeat told it the new term; the
// node asks coordd (a heartbeat now) and accepts it.
func TestNewCoordinatorTermIsConfirmedByAskingCoordd(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), func(c *Config) { c.HeartbeatInterval = time.Hour })
	testutil.Eventually(t, "first heartbeat", func() bool { return n.Status().MaxCoordTerm == 3 })
	id, epoch := n.Session()
	f.mu.Lock()
	f.coordTerm = 8 // heartbeats answer 8; the assignment stream still says 3
	f.mu.Unlock()
	f.setChannel(pch, 2, id)
	_, err := n.cl.Assign(context.Background(), &coordpb.AssignRequest{Pchannel: pch, Term: 2, AccessMode: "RW", CoordTerm: 8,
		NodeId: id, Epoch: epoch})
	if err != nil {
		t.Fatalf("assign at the new coordinator term: %v", err)
	}
	if st := n.Status(); st.MaxCoordTerm != 8 {
		t.Fatalf("max coord term %d, want 8", st.MaxCoordTerm)
	}
}

// TestAssignAfterRemoveOfItsTermIsRefused: lifecycle requests are ordered
// by term; an Assign arriving after the Remove of its term (a delayed
// retry) does not reopen the WAL, whether the WAL was held or not.
func TestAssignAfterRemoveOfItsTermIsRefused(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	if err := n.assign(t, pch, 5, 3); err != nil {
		t.Fatal(err)
	}
	if err := n.remove(t, pch, 5, 3); err != nil {
		t.Fatal(err)
	}
	wantErr(t, n.assign(t, pch, 5, 3), codes.FailedPrecondition, "stale pchannel term")
	if _, ok := n.heldTerm(pch); ok {
		t.Fatal("a late Assign reopened a removed term")
	}
	// Remove before the Assign of the same term ever arrived.
	id, _ := n.Session()
	f.setChannel("dml_1", 4, id)
	if err := n.remove(t, "dml_1", 4, 3); err != nil {
		t.Fatal(err)
	}
	wantErr(t, n.assign(t, "dml_1", 4, 3), codes.FailedPrecondition, "stale pchannel term")
	// A newer term opens.
	if err := n.assign(t, "dml_1", 6, 3); err != nil {
		t.Fatal(err)
	}
	if term, ok := n.heldTerm("dml_1"); !ok || term != 6 {
		t.Fatalf("held %d %v", term, ok)
	}
}

// TestRequestsForAnotherIdentityAreRefused: a request names the node ID
// and epoch it is meant for; another registration at the same address
// refuses it and changes nothing.
func TestRequestsForAnotherIdentityAreRefused(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), shortConfirm)
	id, epoch := n.Session()
	f.setChannel(pch, 2, id)
	for _, who := range []struct{ id, epoch uint64 }{{id + 1, epoch}, {id, epoch - 1}} {
		_, err := n.cl.Assign(context.Background(), &coordpb.AssignRequest{Pchannel: pch, Term: 2, CoordTerm: 3, NodeId: who.id, Epoch: who.epoch})
		wantErr(t, err, codes.FailedPrecondition, "wrong node: the request is meant for streaming node")
		_, err = n.cl.Remove(context.Background(), &coordpb.RemoveRequest{Pchannel: pch, Term: 2, CoordTerm: 3, NodeId: who.id, Epoch: who.epoch})
		wantErr(t, err, codes.FailedPrecondition, "wrong node")
	}
	_, err := n.cl.Assign(context.Background(), &coordpb.AssignRequest{Pchannel: pch, Term: 2, CoordTerm: 3})
	wantErr(t, err, codes.InvalidArgument, "node_id and epoch are required")
	if _, ok := n.heldTerm(pch); ok {
		t.Fatal("a request for another identity opened the WAL")
	}
	// coordd's view assigns the channel to another node: refused too.
	f.setChannel("dml_1", 2, id+7)
	wantErr(t, n.forgedAssign("dml_1", 2, 3), codes.FailedPrecondition, "assigns pchannel dml_1 at term 2 to node")
	// Appends are addressed as well.
	if err := n.assign(t, pch, 3, 3); err != nil {
		t.Fatal(err)
	}
	_, err = n.cl.Append(context.Background(), &coordpb.AppendRequest{Vchannel: vch, Term: 3, Payload: []byte("x"), NodeId: id + 1, Epoch: epoch})
	wantErr(t, err, codes.FailedPrecondition, "wrong node")
	_, err = n.cl.Append(context.Background(), &coordpb.AppendRequest{Vchannel: vch, Term: 3, Payload: []byte("x")})
	wantErr(t, err, codes.InvalidArgument, "node_id and epoch are required")
	if msgs := n.readAll(t, vch, 0); len(msgs) != 0 {
		t.Fatalf("refused appends were written: %q", payloadsOf(msgs))
	}
}

// TestCancelledAppendIsNotWritten: an append whose caller gave up while it
// waited for the PChannel (e.g. the broadcaster's step ended after an
// operator's Abandon) is not written, so it cannot land after a later
// append that the same caller sent once it had given up.
func TestCancelledAppendIsNotWritten(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	// Take a batch of timestamps now, so X's timestamp comes from memory
	// and nothing but the cancellation check can stop it.
	n.mustAppend(t, "dml_0_101v0", 2, "warm-up")
	waiting := make(chan string, 2)
	testHookAppendWaitsForSlot = func(req *coordpb.AppendRequest) { waiting <- string(req.Payload) }
	t.Cleanup(func() { testHookAppendWaitsForSlot = nil })
	sl := n.slotFor(pch, false)
	sl.mu.Lock() // the PChannel is busy: appends queue behind this

	id, epoch := n.Session()
	req := func(p string) *coordpb.AppendRequest {
		return &coordpb.AppendRequest{Vchannel: vch, Term: 2, Payload: []byte(p), BroadcastId: 0, NodeId: id, Epoch: epoch}
	}
	xctx, cancelX := context.WithCancel(context.Background())
	xdone := make(chan error, 1)
	go func() { _, err := n.cl.Append(xctx, req("X")); xdone <- err }()
	if got := <-waiting; got != "X" {
		t.Fatalf("hook saw %q", got)
	}
	cancelX() // the caller gives up on X
	if err := <-xdone; err == nil {
		t.Fatal("X returned success while the slot was held")
	}
	// The same caller now sends Y on the same connection.
	ydone := make(chan error, 1)
	go func() { _, err := n.cl.Append(context.Background(), req("Y")); ydone <- err }()
	if got := <-waiting; got != "Y" {
		t.Fatalf("hook saw %q", got)
	}
	sl.mu.Unlock()
	if err := <-ydone; err != nil {
		t.Fatalf("Y: %v", err)
	}
	testHookAppendWaitsForSlot = nil
	if got := payloadsOf(n.readAll(t, vch, 0)); got != "Y" {
		t.Fatalf("WAL holds %q, want only Y (the cancelled X must not be written)", got)
	}
}

// TestUnsafeNoFenceBreaksTheNode pins what the test-only breakage does (the
// Jepsen-style smoke-broken-fence-3 scenario relies on it): Remove is
// ignored and a deposed owner's append lands past the fence.
func TestUnsafeNoFenceBreaksTheNode(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n1 := startNode(t, f, dir, func(c *Config) { c.UnsafeNoFence = true })
	n2 := startNode(t, f, dir, nil)
	if err := n1.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	if err := n2.assign(t, pch, 3, 3); err != nil {
		t.Fatal(err)
	}
	n2.mustAppend(t, vch, 3, "new-owner")
	if err := n1.remove(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	if term, ok := n1.heldTerm(pch); !ok || term != 2 {
		t.Fatalf("the broken node dropped its WAL on Remove: %d %v", term, ok)
	}
	if _, err := n1.append(vch, 2, "zombie", 0); err != nil {
		t.Fatalf("the broken node refused to write past the fence: %v", err)
	}
	var ce *wal.CorruptError
	if _, err := wal.ReadAll(dir, pch, "", 0); !errors.As(err, &ce) || !ce.TermRegression {
		t.Fatalf("read after the zombie write: %v", err)
	}
}

// TestAssignConfirmedByAskingCoorddWhenTheStreamLags: the assignment
// stream has not delivered the new assignment (its member may be cut
// off); the node reads the PChannels from coordd and accepts the Assign.
func TestAssignConfirmedByAskingCoorddWhenTheStreamLags(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), func(c *Config) { c.ConfirmTimeout = 2 * time.Second })
	testutil.Eventually(t, "coord term from heartbeat", func() bool { return n.Status().MaxCoordTerm == 3 })
	id, epoch := n.Session()
	f.setChannelQuiet(pch, 2, id)
	_, err := n.cl.Assign(context.Background(), &coordpb.AssignRequest{Pchannel: pch, Term: 2, AccessMode: "RW", CoordTerm: 3,
		NodeId: id, Epoch: epoch})
	if err != nil {
		t.Fatalf("assign the stream has not shown yet: %v", err)
	}
	f.mu.Lock()
	calls := f.listCalls
	f.mu.Unlock()
	if calls == 0 {
		t.Fatal("the node did not ask coordd for the PChannels")
	}
	// A term coordd does not report is still refused after asking.
	wantErr(t, n.forgedAssign(pch, 9, 3), codes.Unavailable, "not confirmed")
}

// TestRemoveCoorddDidNotDecideIsRefused: a Remove of the term coordd's
// assignment view still holds (every value public: GET /v1/pchannels and
// /v1/nodes) is one coordd never sent, since it removes a term only after
// committing a newer one; it is refused and the WAL stays open. Once the
// view moves on, the same Remove closes the WAL.
func TestRemoveCoorddDidNotDecideIsRefused(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), shortConfirm)
	if err := n.assign(t, pch, 7, 3); err != nil {
		t.Fatal(err)
	}
	id, epoch := n.Session()
	forged := &coordpb.RemoveRequest{Pchannel: pch, Term: 7, CoordTerm: 3, NodeId: id, Epoch: epoch}
	_, err := n.cl.Remove(context.Background(), forged)
	wantErr(t, err, codes.Unavailable, "coordd removes a term only after assigning a newer one")
	if term, ok := n.heldTerm(pch); !ok || term != 7 {
		t.Fatalf("after a Remove coordd did not decide: held %d %v, want term 7", term, ok)
	}
	n.mustAppend(t, vch, 7, "still-writable")
	// coordd moves the channel on (term 8 elsewhere) and removes term 7.
	f.setChannel(pch, 8, id+1)
	if _, err := n.cl.Remove(context.Background(), forged); err != nil {
		t.Fatalf("Remove after coordd committed term 8: %v", err)
	}
	if _, ok := n.heldTerm(pch); ok {
		t.Fatal("still held after coordd's Remove")
	}
}

// TestHeartbeatsListHeldWALs: every heartbeat lists the WALs the node
// really has open, with their terms, so coordd notices a lost one.
func TestHeartbeatsListHeldWALs(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	id, _ := n.Session()
	held := func() map[string]int64 { return f.node(id).held }
	testutil.Eventually(t, "a heartbeat reporting no WALs", func() bool { h := held(); return h != nil && len(h) == 0 })
	if err := n.assign(t, pch, 4, 3); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a heartbeat listing dml_0 at term 4", func() bool { h := held(); return len(h) == 1 && h[pch] == 4 })
	if err := n.remove(t, pch, 4, 3); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "a heartbeat without dml_0", func() bool { h := held(); return h != nil && len(h) == 0 })
}
