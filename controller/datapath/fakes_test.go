package datapath

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// fakeLeader is controllertest.Leader as the service sees a node: a
// linearizable read is its state.
type fakeLeader struct{ *controllertest.Leader }

func (f fakeLeader) LinearizableRead(context.Context) (*fsm.State, error) { return f.State(), nil }
func (f fakeLeader) IsLeader() bool                                       { return f.EstablishedTerm() != 0 }

// fakeTSO hands out increasing timestamps at the fake clock's time.
type fakeTSO struct {
	mu    sync.Mutex
	clock interface{ Now() time.Time }
	last  uint64
}

func (t *fakeTSO) Alloc(context.Context, uint32) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = max(t.last+1, fsm.ComposeTS(t.clock.Now().UnixMilli()))
	return t.last, nil
}

func (t *fakeTSO) AllocVia(ctx context.Context, count uint32, _ commands.Proposer) (uint64, error) {
	return t.Alloc(ctx, count)
}

func (t *fakeTSO) PhysicalMs() int64 { return t.clock.Now().UnixMilli() }

// fakeRevisions answers every named-revision check with err.
type fakeRevisions struct{ err error }

func (r fakeRevisions) CheckNamedRevision(context.Context, *fsm.State, int64, string) error {
	return r.err
}

// fakeSessions is a session tracker with set heartbeat ages.
type fakeSessions struct {
	mu    sync.Mutex
	ttl   time.Duration
	ages  map[uint64]time.Duration
	beats []uint64
}

func (f *fakeSessions) HeartbeatHeld(node, _ uint64, _ fsm.AssignmentVersion, _ map[string]int64, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.beats = append(f.beats, node)
}

func (f *fakeSessions) LastSeen(node uint64) (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.ages[node]
	return a, ok
}

func (f *fakeSessions) TTL() time.Duration { return f.ttl }

type broadcastFunc func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error)

func (f broadcastFunc) Broadcast(ctx context.Context, c broadcaster.Checked) (broadcaster.Result, error) {
	return f(ctx, c.Request())
}

// world is a service over a fake leader at term 3 with one streaming node
// holding PChannels "dp-dml_0" and "dp-dml_1" (at one term) and collection
// 7 with one VChannel on each.
type world struct {
	l        *controllertest.Leader
	svc      *Service
	flush    *flush.Manager
	sessions *fakeSessions
	node     uint64
	term     int64  // the node's PChannel term
	vch      string // collection 7 has two VChannels: vch and vch2
	vch2     string
}

func newWorld(t *testing.T, d Deps) *world {
	t.Helper()
	clock := controllertest.NewClock()
	l := controllertest.NewLeader(t, clock, 3)
	pchs := []string{vocab.PChannelName("dp-dml", 0), vocab.PChannelName("dp-dml", 1)}
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "dp", Pchannels: pchs})
	node := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:9", Incarnation: "i"}).GetRegisterNode().GetNodeId()
	var as []*logpb.PChannelAssignment
	for _, pch := range pchs {
		p, _ := l.State().PChannel(pch)
		as = append(as, &logpb.PChannelAssignment{Pchannel: pch, NodeId: node, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term})
	}
	res := l.MustPropose(t, &logpb.AssignPChannels{Assignments: as})
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: res.GetAssign().GetAssigned()})
	l.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: 7, Count: 2})
	coll, _ := l.State().Collection(7)
	w := &world{l: l, node: node, term: res.GetAssign().GetAssigned()[0].Term, vch: coll.Vchannels[0], vch2: coll.Vchannels[1],
		sessions: &fakeSessions{ttl: time.Second, ages: map[uint64]time.Duration{}}}
	tso := &fakeTSO{clock: clock}
	w.flush = flush.New(l, tso, clock, flush.Config{})
	d.Leader, d.TSO, d.Flush, d.Sessions, d.Clock = fakeLeader{l}, tso, w.flush, w.sessions, clock
	if d.Revisions == nil {
		d.Revisions = fakeRevisions{}
	}
	w.svc = New(d)
	return w
}

// segment creates a growing segment on the world's VChannel.
func (w *world) segment(t *testing.T) int64 {
	t.Helper()
	return w.l.MustPropose(t, &logpb.CreateSegment{CollectionId: 7, PartitionId: 1, Vchannel: w.vch, NodeId: w.node, PchannelTerm: w.term}).GetSegments().GetIds()[0]
}
