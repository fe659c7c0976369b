package flush

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// fakeClock is a settable clock: tests move time, nothing sleeps.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// fakeLeader applies proposals straight to an fsm.State, stamping the
// clock's time and the decision term the way the raft node does.
type fakeLeader struct {
	mu        sync.Mutex
	st        *fsm.State
	term      uint64
	clock     *fakeClock
	proposals []commands.Command
}

func (f *fakeLeader) EstablishedTerm() uint64 { f.mu.Lock(); defer f.mu.Unlock(); return f.term }
func (f *fakeLeader) State() *fsm.State       { f.mu.Lock(); defer f.mu.Unlock(); return f.st }

func (f *fakeLeader) Propose(ctx context.Context, c commands.Command) (*logpb.Result, error) {
	if !c.Checked() {
		return nil, commands.ErrInvalid
	}
	if c.LeaderTerm == 0 {
		c.LeaderTerm = commands.DecisionTerm(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.LeaderTerm == 0 {
		c.LeaderTerm = f.term
	}
	c.ProposedAtUnixMs = f.clock.Now().UnixMilli()
	next, res, err := f.st.ApplyCommands(f.st.AppliedIndex()+1, c)
	if err != nil {
		return nil, err
	}
	f.st = next
	f.proposals = append(f.proposals, c)
	return res[0], nil
}

func (f *fakeLeader) count(t commands.Type) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.proposals {
		if c.Type == t {
			n++
		}
	}
	return n
}

// apply applies setup commands (as the log would, at the clock's time).
func (f *fakeLeader) apply(t *testing.T, bodies ...proto.Message) []*logpb.Result {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*logpb.Result
	for _, b := range bodies {
		c := commands.MustNew(b)
		c.ProposedAtUnixMs = f.clock.Now().UnixMilli()
		next, res, err := f.st.ApplyCommands(f.st.AppliedIndex()+1, c)
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Rejection != nil {
			t.Fatalf("setup %s rejected: %v", c.Type, res[0].Rejection)
		}
		f.st = next
		out = append(out, res[0])
	}
	return out
}

// establish makes the fake lead in term (as LeaderEstablished would).
func (f *fakeLeader) establish(t *testing.T, term uint64) {
	f.apply(t, &logpb.LeaderEstablished{Term: term, LeaderId: "c1"})
	f.mu.Lock()
	f.term = term
	f.mu.Unlock()
}

type fakeTSO struct {
	clock *fakeClock
	mu    sync.Mutex
	last  uint64
}

func (t *fakeTSO) Alloc(ctx context.Context, count uint32) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := max(fsm.ComposeTS(t.clock.Now().UnixMilli()), t.last+1)
	t.last = ts + uint64(count) - 1
	return ts, nil
}

const (
	coll  = int64(100)
	pch0  = "dml_0"
	pch1  = "dml_1"
	node1 = uint64(1)
	node2 = uint64(2)
)

var (
	vch0 = commands.VChannelName(pch0, coll, 0)
	vch1 = commands.VChannelName(pch1, coll, 1)
)

// fixture: leader in term 2; nodes 1 and 2; dml_0 → node 1 and dml_1 →
// node 2, both at term 2; collection 100 with vch0 (dml_0), vch1 (dml_1).
func fixture(t *testing.T, cfg Config) (*Manager, *fakeLeader, *fakeClock) {
	clock := &fakeClock{now: time.UnixMilli(1_700_000_000_000)}
	l := &fakeLeader{st: fsm.New(), clock: clock}
	l.establish(t, 2)
	l.apply(t,
		&logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"},
		&logpb.RegisterStreamingNode{Address: "10.0.0.2:1", Incarnation: "b"},
		&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{pch0, pch1}},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: pch0, NodeId: node1, ExpectedTerm: 1}, {Pchannel: pch1, NodeId: node2, ExpectedTerm: 1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: pch0, Term: 2}, {Pchannel: pch1, Term: 2}}},
		&logpb.AllocVirtualChannels{CollectionId: coll, Count: 2},
	)
	if c, _ := l.State().Collection(coll); c.Vchannels[0] != vch0 || c.Vchannels[1] != vch1 {
		t.Fatalf("fixture vchannels %v", c.Vchannels)
	}
	m := New(l, &fakeTSO{clock: clock}, clock, cfg)
	return m, l, clock
}
