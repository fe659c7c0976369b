package flush

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// fakeTSO hands out strictly increasing timestamps from the fake clock.
type fakeTSO struct {
	clock clockwork.Clock
	mu    sync.Mutex
	last  uint64
}

func (t *fakeTSO) AllocVia(ctx context.Context, count uint32, _ commands.Proposer) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := max(fsm.ComposeTS(t.clock.Now().UnixMilli()), t.last+1)
	t.last = ts + uint64(count) - 1
	return ts, nil
}

func (t *fakeTSO) PhysicalMs() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return max(t.clock.Now().UnixMilli(), fsm.PhysicalMs(t.last))
}

const (
	coll  = int64(100)
	pch0  = "dml_0"
	pch1  = "dml_1"
	node1 = uint64(1)
	node2 = uint64(2)
)

var (
	vch0 = vocab.VChannelName(pch0, coll, 0)
	vch1 = vocab.VChannelName(pch1, coll, 1)
)

// creates counts the CreateSegment commands applied.
func creates(l *controllertest.Leader) int {
	return len(controllertest.AppliedOf[*logpb.CreateSegment](l))
}

// fixture: a fake leader in term 2 over a real FSM; nodes 1 and 2; dml_0 →
// node 1 and dml_1 → node 2, both at term 2; collection 100 with vch0
// (dml_0) and vch1 (dml_1).
// fixture is bareFixture with a committed TSO window a day past the clock
// (a real leader keeps one ahead), so the time ticks and positions the
// tests report are within the position bounds.
func fixture(t *testing.T, cfg Config) (*Manager, *controllertest.Leader, *clockwork.FakeClock) {
	m, l, clock := bareFixture(t, cfg)
	l.MustPropose(t, &logpb.ExtendTSOWindow{LimitPhysicalMs: clock.Now().Add(24 * time.Hour).UnixMilli()})
	return m, l, clock
}

// bareFixture: two streaming nodes holding dml_0 and dml_1 at term 2,
// collection 100 on them, no TSO window committed yet.
func bareFixture(t *testing.T, cfg Config) (*Manager, *controllertest.Leader, *clockwork.FakeClock) {
	clock := controllertest.NewClock()
	l := controllertest.NewLeader(t, clock, 2)
	l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"})
	l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "10.0.0.2:1", Incarnation: "b"})
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{pch0, pch1}})
	l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: pch0, NodeId: node1, ExpectedTerm: 1}, {Pchannel: pch1, NodeId: node2, ExpectedTerm: 1}}})
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: pch0, Term: 2}, {Pchannel: pch1, Term: 2}}})
	l.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: coll, Count: 2})
	if c, _ := l.State().Collection(coll); c.Vchannels[0] != vch0 || c.Vchannels[1] != vch1 {
		t.Fatalf("fixture vchannels %v", c.Vchannels)
	}
	return New(l, &fakeTSO{clock: clock}, clock, cfg), l, clock
}
