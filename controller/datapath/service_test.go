package datapath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
)

func checkpoints(t *testing.T, node uint64, cps ...*coordpb.ChannelCheckpoint) Checkpoints {
	t.Helper()
	c, err := NewCheckpoints(&coordpb.UpdateChannelCheckpointsRequest{NodeId: node, Checkpoints: cps})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The checkpoint pre-filter: an entry not newer than the stored checkpoint
// is refused without a log entry, so a batch of only such entries costs no
// raft round; a mixed batch proposes only the rest, and the refusals of
// both the filter and Apply are listed.
func TestCheckpointsPrefilterSkipsARaftRoundForStaleEntries(t *testing.T) {
	w := newWorld(t, Deps{})
	ctx := w.l.Deadline()
	ts := fsm.ComposeTS(1000) // within the committed TSO limit (none) plus its lead
	cpOf := func(v string, offset uint64) *coordpb.ChannelCheckpoint {
		return &coordpb.ChannelCheckpoint{Vchannel: v, PchannelTerm: w.term,
			Position: &coordpb.Position{Term: w.term, Offset: offset, Timestamp: ts + offset}}
	}
	cp := func(offset uint64) *coordpb.ChannelCheckpoint { return cpOf(w.vch, offset) }
	r, err := w.svc.UpdateChannelCheckpoints(ctx, checkpoints(t, w.node, cp(10)))
	if err != nil || r.Accepted != 1 || len(r.Refused) != 0 {
		t.Fatalf("first checkpoint: %+v %v", r, err)
	}
	applied := len(w.l.Applied())
	r, err = w.svc.UpdateChannelCheckpoints(ctx, checkpoints(t, w.node, cp(10)))
	if err != nil || r.Accepted != 0 || !slices.Equal(r.Refused, []string{w.vch + ": not newer than the stored checkpoint"}) {
		t.Fatalf("repeated checkpoint: %+v %v", r, err)
	}
	if got := len(w.l.Applied()); got != applied {
		t.Fatalf("a batch of only stale checkpoints proposed %d commands", got-applied)
	}
	// Mixed: the stale entry is filtered, the unknown VChannel goes to
	// Apply and is refused there, the newer one is accepted.
	unknown := cpOf("dp-dml_0_99v0", 30)
	r, err = w.svc.UpdateChannelCheckpoints(ctx, checkpoints(t, w.node, cp(5), unknown, cpOf(w.vch2, 20)))
	if err != nil || r.Accepted != 1 || len(r.Refused) != 2 ||
		!strings.Contains(r.Refused[0], "not newer") || !strings.HasPrefix(r.Refused[1], "dp-dml_0_99v0: ") {
		t.Fatalf("mixed batch: %+v %v", r, err)
	}
	got := controllertest.AppliedOf[*logpb.UpdateChannelCheckpoints](w.l)
	if last := got[len(got)-1]; len(last.Checkpoints) != 2 || last.Checkpoints[0].Vchannel != unknown.Vchannel || last.Checkpoints[1].Vchannel != w.vch2 {
		t.Fatalf("proposed %v, want the two entries the filter kept", last)
	}
	if cur, _ := w.l.State().ChannelCheckpoint(w.vch2); cur == nil || cur.Position.Offset != 20 {
		t.Fatalf("checkpoint of %s: %+v, want offset 20", w.vch2, cur)
	}
	if cur, _ := w.l.State().ChannelCheckpoint(w.vch); cur.Position.Offset != 10 {
		t.Fatalf("checkpoint of %s moved to offset %d", w.vch, cur.Position.Offset)
	}
}

// A save that makes a sealed segment Flushed is observed by the flush
// manager with the time since its seal, read before the save.
func TestSaveObservesASegmentBecomingFlushed(t *testing.T) {
	w := newWorld(t, Deps{})
	ctx := w.l.Deadline()
	var observed []time.Duration
	w.flush.SetFlushObserver(func(d time.Duration) { observed = append(observed, d) })
	seg := w.segment(t)
	w.l.MustPropose(t, &logpb.SealSegments{SegmentIds: []int64{seg}, SealTs: fsm.ComposeTS(controllertest.Epoch.UnixMilli()), Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: 3})
	clock := w.svc.clock.(interface{ Advance(time.Duration) })
	clock.Advance(5 * time.Second)
	ts := fsm.ComposeTS(1000)
	save := func(flushed bool) Save {
		sv, err := NewSave(&coordpb.SaveBinlogPathsRequest{NodeId: w.node, Vchannel: w.vch, PchannelTerm: w.term,
			SegmentId: seg, CollectionId: 7, PartitionId: 1, Flushed: flushed,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 1, Binlogs: []*coordpb.Binlog{{LogId: 1, EntriesNum: 10, TimestampFrom: ts, TimestampTo: ts, MemorySize: 100}}}},
			Checkpoints:  []*coordpb.SegmentCheckpoint{{SegmentId: seg, NumOfRows: 10, Position: &coordpb.Position{Term: w.term, Offset: 1, Timestamp: ts}}}})
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	if r, err := w.svc.SaveBinlogPaths(ctx, save(false)); err != nil || r.State != logpb.SegmentState_SEGMENT_SEALED {
		t.Fatalf("unflushed save: %+v %v", r, err)
	}
	if len(observed) != 0 {
		t.Fatalf("a save that does not flush was observed: %v", observed)
	}
	if r, err := w.svc.SaveBinlogPaths(ctx, save(true)); err != nil || r.State != logpb.SegmentState_SEGMENT_FLUSHED {
		t.Fatalf("flushing save: %+v %v", r, err)
	}
	if !slices.Equal(observed, []time.Duration{5 * time.Second}) {
		t.Fatalf("observed %v, want [5s]", observed)
	}
	// A retried flushed save is stale: not observed twice.
	if r, err := w.svc.SaveBinlogPaths(ctx, save(true)); err != nil || !r.Stale || len(observed) != 1 {
		t.Fatalf("retried save: %+v %v, observed %v", r, err, observed)
	}
}

// A refused named revision stops the save before anything is proposed.
func TestSaveChecksTheNamedRevisionFirst(t *testing.T) {
	bad := errors.New("no such revision")
	w := newWorld(t, Deps{Revisions: fakeRevisions{err: bad}})
	seg := w.segment(t)
	sv, err := NewSave(&coordpb.SaveBinlogPathsRequest{NodeId: w.node, Vchannel: w.vch, PchannelTerm: w.term, SegmentId: seg, CollectionId: 7, PartitionId: 1})
	if err != nil {
		t.Fatal(err)
	}
	applied := len(w.l.Applied())
	if _, err := w.svc.SaveBinlogPaths(w.l.Deadline(), sv); !errors.Is(err, bad) || len(w.l.Applied()) != applied {
		t.Fatalf("save with a refused revision: %v, %d commands", err, len(w.l.Applied())-applied)
	}
}

func TestNewRequestsRefuseBadShapes(t *testing.T) {
	for name, err := range map[string]error{
		"save level": func() error { _, err := NewSave(&coordpb.SaveBinlogPathsRequest{Level: "L7"}); return err }(),
		"save segment": func() error {
			_, err := NewSave(&coordpb.SaveBinlogPathsRequest{NodeId: 1, Vchannel: "dp-dml_0_7v0"})
			return err
		}(),
		"import level": func() error { _, err := NewCreateImport(&coordpb.CreateImportSegmentRequest{Level: "L0"}); return err }(),
		"flush":        func() error { _, err := NewFlush(&coordpb.FlushRequest{}); return err }(),
		"assign":       func() error { _, err := NewAssign(&coordpb.AssignSegmentIDRequest{NodeId: 1}); return err }(),
		"ticks":        func() error { _, err := NewTicks(&coordpb.ReportTimeTicksRequest{}); return err }(),
		"checkpoints": func() error {
			_, err := NewCheckpoints(&coordpb.UpdateChannelCheckpointsRequest{NodeId: 1})
			return err
		}(),
		"registration": func() error { _, err := NewRegistration(&coordpb.RegisterStreamingNodeRequest{}, 0); return err }(),
		"heartbeat held": func() error {
			_, err := NewHeartbeat(&coordpb.HeartbeatRequest{Held: []*coordpb.HeldPChannel{{Pchannel: "dml_0", Term: 1}}})
			return err
		}(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Flush seals the collection's growing segments at one fresh timestamp
// and answers the checkpoints read before and the segments after.
func TestFlushSealsTheCollection(t *testing.T) {
	w := newWorld(t, Deps{})
	ctx := w.l.Deadline()
	seg := w.segment(t)
	if _, err := w.svc.Flush(ctx, FlushRequest{collection: 8}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("flush of an unknown collection: %v", err)
	}
	r, err := w.svc.Flush(ctx, FlushRequest{collection: 7})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := w.l.State().Segment(seg)
	if !slices.Equal(r.Sealed, []int64{seg}) || r.FlushTs == 0 || g.SealTs != r.FlushTs || len(r.Flushed) != 0 {
		t.Fatalf("flush: %+v, segment sealed at %d", r, g.SealTs)
	}
}

// FlushAll answers only what its own broadcast's callback recorded.
func TestFlushAllCrossChecksTheBroadcastID(t *testing.T) {
	if _, err := newWorld(t, Deps{}).svc.FlushAll(context.Background()); !errors.Is(err, ErrNoBroadcaster) {
		t.Fatalf("FlushAll without a broadcaster: %v", err)
	}
	var got broadcaster.Request
	w := newWorld(t, Deps{Broadcasts: broadcastFunc(func(_ context.Context, req broadcaster.Request) (broadcaster.Result, error) {
		got = req
		return broadcaster.Result{BroadcastID: 41}, nil // completed, but no callback recorded it
	})})
	_, err := w.svc.FlushAll(w.l.Deadline())
	if !errors.Is(err, ErrPrecondition) || !strings.Contains(err.Error(), "broadcast 41") {
		t.Fatalf("FlushAll whose callback is not recorded: %v", err)
	}
	if len(got.ResourceKeys) != 1 || got.ResourceKeys[0].Domain != logpb.ResourceDomain_RK_CLUSTER || got.ResourceKeys[0].Shared {
		t.Fatalf("FlushAll locked %v, want the exclusive Cluster key", got.ResourceKeys)
	}
}

// A second process at a live node's address is refused; once the
// session has lapsed, the newcomer replaces it.
func TestRegisterReplacesOnlyALapsedSession(t *testing.T) {
	w := newWorld(t, Deps{})
	ctx := w.l.Deadline()
	reg, err := NewRegistration(&coordpb.RegisterStreamingNodeRequest{Address: "127.0.0.1:9", Incarnation: "j"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.sessions.ages[w.node] = 100 * time.Millisecond
	applied := len(w.l.Applied())
	if _, err := w.svc.Register(ctx, reg); !errors.Is(err, ErrPrecondition) || len(w.l.Applied()) != applied {
		t.Fatalf("register at a live node's address: %v", err)
	}
	w.sessions.ages[w.node] = 2 * time.Second
	r, err := w.svc.Register(ctx, reg)
	if err != nil || r.NodeId == w.node {
		t.Fatalf("register after the session lapsed: %+v %v", r, err)
	}
	if n, _ := w.l.State().StreamingNode(w.node); n != nil && n.State != logpb.NodeState_NODE_DOWN {
		t.Fatalf("replaced node is %s", n.State)
	}
	w.l.SetEstablished(0)
	if _, err := w.svc.Register(ctx, reg); !errors.Is(err, leadership.ErrNotLeader) {
		t.Fatalf("register on a non-leader: %v", err)
	}
}

func TestHeartbeatNeedsALiveSession(t *testing.T) {
	w := newWorld(t, Deps{})
	ctx := w.l.Deadline()
	n, _ := w.l.State().StreamingNode(w.node)
	if _, err := w.svc.Heartbeat(ctx, Heartbeat{Node: w.node, Epoch: n.Epoch + 1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("heartbeat of another epoch: %v", err)
	}
	r, err := w.svc.Heartbeat(ctx, Heartbeat{Node: w.node, Epoch: n.Epoch})
	if err != nil || r.CoordTerm != 3 || r.State != n.State || r.TTLMs != 1000 || !slices.Equal(w.sessions.beats, []uint64{w.node}) {
		t.Fatalf("heartbeat: %+v %v, beats %v", r, err, w.sessions.beats)
	}
}

// Who may end a session is asked first, except for the deregistration of
// a record already gone, which answers DOWN.
func TestEndSessionAsksWhoMaySpeakForTheNode(t *testing.T) {
	w := newWorld(t, Deps{})
	ctx := w.l.Deadline()
	var asked []uint64
	refuse := errors.New("not yours")
	speaksAs := func(caller uint64, err error) SpeaksFor {
		return func(_ context.Context, node uint64) (uint64, error) {
			asked = append(asked, node)
			return caller, err
		}
	}
	speaksFor := func(err error) SpeaksFor { return speaksAs(0, err) }
	r, err := w.svc.EndSession(ctx, Session{Node: 999}, true, speaksFor(refuse))
	if err != nil || r.State != logpb.NodeState_NODE_DOWN || len(asked) != 0 {
		t.Fatalf("deregister an unknown node: %+v %v, asked %v", r, err, asked)
	}
	if _, err := w.svc.EndSession(ctx, Session{Node: 999}, false, speaksFor(refuse)); !errors.Is(err, refuse) {
		t.Fatalf("drain of an unknown node: %v", err)
	}
	if _, err := w.svc.EndSession(ctx, Session{}, true, speaksFor(nil)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("deregister node 0: %v, want invalid", err)
	}
	n, _ := w.l.State().StreamingNode(w.node)
	// Probe L10: another epoch of a node that is up is not answered DOWN.
	for _, dereg := range []bool{true, false} {
		_, err := w.svc.EndSession(ctx, Session{Node: w.node, Epoch: n.Epoch - 1}, dereg, speaksFor(nil))
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), fmt.Sprintf("has epoch %d, not %d", n.Epoch, n.Epoch-1)) {
			t.Fatalf("end session (deregister %v) of another epoch: %v, want NotFound naming the epochs", dereg, err)
		}
	}
	if cur, _ := w.l.State().StreamingNode(w.node); cur.State != n.State {
		t.Fatalf("a refused end of session changed the node: %v", cur.State)
	}
	asked = nil
	if _, err := w.svc.EndSession(ctx, Session{Node: w.node, Epoch: n.Epoch}, true, speaksFor(refuse)); !errors.Is(err, refuse) {
		t.Fatalf("deregister refused by the identity check: %v", err)
	}
	// The drain is stamped with the caller's identity: Apply refuses it
	// for a session bound to another (here: to none).
	var rej *commands.RejectedError
	if _, err := w.svc.EndSession(ctx, Session{Node: w.node, Epoch: n.Epoch}, false, speaksAs(77, nil)); !errors.As(err, &rej) || rej.Code != logpb.RejectCode_REJECT_PERMISSION {
		t.Fatalf("drain stamped with another node identity: %v, want REJECT_PERMISSION", err)
	}
	r, err = w.svc.EndSession(ctx, Session{Node: w.node, Epoch: n.Epoch}, false, speaksFor(nil))
	if err != nil || r.State != logpb.NodeState_NODE_DRAINING || len(r.PChannels) != 2 {
		t.Fatalf("drain: %+v %v", r, err)
	}
	r, err = w.svc.EndSession(ctx, Session{Node: w.node, Epoch: n.Epoch}, true, speaksFor(nil))
	if err != nil || r.State != logpb.NodeState_NODE_DOWN {
		t.Fatalf("deregister: %+v %v", r, err)
	}
	if !slices.Equal(asked, []uint64{w.node, w.node, w.node, w.node}) {
		t.Fatalf("asked for %v", asked)
	}
}

// Flush tasks: a live session of this epoch, and only Flushing segments
// on the PChannels the node holds.
func TestFlushTasksOfASession(t *testing.T) {
	w := newWorld(t, Deps{})
	n, _ := w.l.State().StreamingNode(w.node)
	if _, err := w.svc.FlushTasks(w.node+7, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tasks of an unknown node: %v", err)
	}
	if _, err := w.svc.FlushTasks(w.node, n.Epoch+1); !errors.Is(err, ErrPrecondition) {
		t.Fatalf("tasks of another epoch: %v", err)
	}
	seg, growing := w.segment(t), w.segment(t)
	w.l.MustPropose(t, &logpb.SealSegments{SegmentIds: []int64{seg}, SealTs: 100, Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: 3})
	w.l.MustPropose(t, &logpb.MarkSegmentsFlushing{SegmentIds: []int64{seg}, DecisionTerm: 3})
	tasks, err := w.svc.FlushTasks(w.node, n.Epoch)
	if err != nil || len(tasks) != 1 || tasks[0].Segment.ID != seg || tasks[0].PChannelTerm != w.term {
		t.Fatalf("tasks: %+v %v (growing segment %d)", tasks, err, growing)
	}
	if got := TasksOf(w.l.State(), w.node+1); len(got) != 0 {
		t.Fatalf("another node's tasks: %+v", got)
	}
}

// TestAssignStampsTheCaller: the segment an allocation creates is stamped
// with the caller's node identity the API checked (Assign.Caller), as
// every command a node's call proposes is.
func TestAssignStampsTheCaller(t *testing.T) {
	w := newWorld(t, Deps{})
	a, err := NewAssign(&coordpb.AssignSegmentIDRequest{NodeId: w.node, Requests: []*coordpb.SegmentIDRequest{
		{CollectionId: 7, PartitionId: 1, Vchannel: w.vch, PchannelTerm: w.term, Rows: 1, Bytes: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	a.Caller = 42
	if _, err := w.svc.AssignSegmentID(w.l.Deadline(), a); err != nil {
		t.Fatal(err)
	}
	applied, callers := w.l.Applied(), w.l.CallerNodes()
	if _, ok := applied[len(applied)-1].(*logpb.CreateSegment); !ok || callers[len(callers)-1] != 42 {
		t.Fatalf("last applied %T stamped with node identity %d; want a CreateSegment stamped with 42", applied[len(applied)-1], callers[len(callers)-1])
	}
}
