package membership

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/leadership"
)

// fakeRaft is a raft configuration in memory that records every change.
type fakeRaft struct {
	mu        sync.Mutex
	servers   []Server
	leader    string
	cluster   string
	changes   []string
	transfers int
	// onTransfer, when set, runs on a transfer (e.g. to elect someone).
	onTransfer func(f *fakeRaft)
}

func (f *fakeRaft) Configuration() ([]Server, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Server(nil), f.servers...), nil
}

func (f *fakeRaft) AddVoter(id, addr string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.servers = append(f.servers, Server{ID: id, RaftAddr: addr, Voter: true})
	f.changes = append(f.changes, "add "+id)
	return nil
}

func (f *fakeRaft) RemoveServer(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.servers {
		if s.ID == id {
			f.servers = append(f.servers[:i], f.servers[i+1:]...)
		}
	}
	f.changes = append(f.changes, "remove "+id)
	return nil
}

func (f *fakeRaft) TransferLeadership(id, _ string) error {
	f.mu.Lock()
	f.transfers++
	f.changes = append(f.changes, "transfer "+id)
	on := f.onTransfer
	f.mu.Unlock()
	if on != nil {
		on(f)
	}
	return nil
}

func (f *fakeRaft) Leader() (string, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, ""
}

func (f *fakeRaft) ClusterID() string { return f.cluster }

func (f *fakeRaft) log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.changes...)
}

// newTestService is the service of member n1, the leader of a cluster c1
// of n1 (voter) and n3 (non-voter), over a fake raft and a fake leader.
func newTestService(t *testing.T) (*Service, *fakeRaft, *controllertest.Leader) {
	t.Helper()
	r := &fakeRaft{cluster: "c1", leader: "n1", servers: []Server{
		{ID: "n1", RaftAddr: "127.0.0.1:7001", Voter: true}, {ID: "n3", RaftAddr: "127.0.0.1:7003"}}}
	l := controllertest.NewLeader(t, controllertest.NewClock(), 1)
	s := New(r, l, "n1")
	s.poll = time.Millisecond
	return s, r, l
}

func directory(l *controllertest.Leader, id string) (*logpb.Member, bool) {
	return l.State().Member(id)
}

// TestAddVoterDecisions: a new member's addresses are recorded before raft
// adds it; an address in use, another cluster, and a member already in the
// configuration joining from a fresh data dir are refused with nothing
// changed.
func TestAddVoterDecisions(t *testing.T) {
	s, r, l := newTestService(t)
	join := func(req *coordpb.AddVoterRequest) error {
		t.Helper()
		j, err := NewJoin(req)
		if err != nil {
			t.Fatalf("NewJoin: %v", err)
		}
		return s.AddVoter(l.Deadline(), j)
	}
	for _, tc := range []struct {
		name string
		req  *coordpb.AddVoterRequest
		text string
	}{
		{"address in use", &coordpb.AddVoterRequest{Id: "n2", RaftAddr: "127.0.0.1:7001"}, "already used by member n1"},
		{"another cluster", &coordpb.AddVoterRequest{Id: "n2", RaftAddr: "127.0.0.1:7002", ClusterId: "c2"}, "member n2 belongs to cluster c2"},
		{"lost data dir", &coordpb.AddVoterRequest{Id: "n3", RaftAddr: "127.0.0.1:7003", Joining: true}, "its data dir never joined it"},
	} {
		if err := join(tc.req); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want ErrRefused mentioning %q", tc.name, err, tc.text)
		}
	}
	if len(r.log()) != 0 || len(l.Applied()) != 1 { // LeaderEstablished only
		t.Fatalf("refused joins changed raft %v or the directory %v", r.log(), l.Applied())
	}
	if err := join(&coordpb.AddVoterRequest{Id: "n2", RaftAddr: "127.0.0.1:7002", GrpcAddr: "127.0.0.1:8002", ClusterId: "c1", Joining: true}); err != nil {
		t.Fatal(err)
	}
	if m, ok := directory(l, "n2"); !ok || m.GrpcAddr != "127.0.0.1:8002" || strings.Join(r.log(), ",") != "add n2" {
		t.Fatalf("directory %v, raft %v; want n2 recorded and added", m, r.log())
	}
	members, err := s.Members()
	if err != nil || len(members) != 3 || members[2].ID != "n2" || members[2].GrpcAddr != "127.0.0.1:8002" || !members[0].Leader {
		t.Fatalf("Members = %+v, %v", members, err)
	}
	if _, err := NewJoin(&coordpb.AddVoterRequest{Id: "bad id", RaftAddr: "127.0.0.1:7"}); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("bad id: %v, want ErrInvalid", err)
	}
}

// TestRemoveMemberDecisions: an unknown member is ErrUnknownMember; the
// leader removing itself hands leadership over and answers not-leader
// without removing anything; another member leaves raft, then the
// directory.
func TestRemoveMemberDecisions(t *testing.T) {
	s, r, l := newTestService(t)
	remove := func(id string) error {
		t.Helper()
		rm, err := NewRemoval(&coordpb.RemoveMemberRequest{Id: id})
		if err != nil {
			t.Fatalf("NewRemoval: %v", err)
		}
		return s.RemoveMember(l.Deadline(), rm)
	}
	if err := remove("ghost"); !errors.Is(err, ErrUnknownMember) || !strings.Contains(err.Error(), `"ghost" is not in the cluster`) {
		t.Fatalf("unknown: %v", err)
	}
	if err := remove("n1"); !errors.Is(err, leadership.ErrNotLeader) || strings.Join(r.log(), ",") != "transfer " {
		t.Fatalf("self: %v (raft %v); want a handover and not-leader", err, r.log())
	}
	l.MustPropose(t, &logpb.UpsertMember{Member: &logpb.Member{Id: "n3", RaftAddr: "127.0.0.1:7003"}})
	if err := remove("n3"); err != nil {
		t.Fatal(err)
	}
	if _, ok := directory(l, "n3"); ok || strings.Join(r.log(), ",") != "transfer ,remove n3" {
		t.Fatalf("after removing n3: in directory %v, raft %v", ok, r.log())
	}
}

// TestTransferLeaderDecisions: a non-voter, this member and an unknown one
// are refused without a transfer; a transfer waits for the new leader.
func TestTransferLeaderDecisions(t *testing.T) {
	s, r, l := newTestService(t)
	transfer := func(target string) (string, error) {
		t.Helper()
		tr, err := NewTransfer(&coordpb.TransferLeaderRequest{TargetId: target})
		if err != nil {
			t.Fatalf("NewTransfer: %v", err)
		}
		return s.TransferLeader(l.Deadline(), tr, time.Second)
	}
	for target, want := range map[string]error{"n3": ErrRefused, "n1": ErrRefused, "ghost": ErrUnknownMember} {
		if _, err := transfer(target); !errors.Is(err, want) {
			t.Errorf("transfer to %s: %v, want %v", target, err, want)
		}
	}
	if r.transfers != 0 {
		t.Fatalf("%d refused transfers reached raft", r.transfers)
	}
	r.onTransfer = func(f *fakeRaft) { f.mu.Lock(); f.leader = "n9"; f.mu.Unlock() }
	if id, err := transfer(""); err != nil || id != "n9" {
		t.Fatalf("transfer = %q, %v; want the new leader n9", id, err)
	}
}

// TestTransferWaitIsTimedByTheClock: a transfer whose target never wins
// returns the leader known when the wait, timed on the injected clock,
// runs out (this member), not before.
func TestTransferWaitIsTimedByTheClock(t *testing.T) {
	s, _, l := newTestService(t)
	clock := controllertest.NewClock()
	s.WithClock(clock)
	tr, err := NewTransfer(&coordpb.TransferLeaderRequest{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 1)
	go func() {
		id, err := s.TransferLeader(l.Deadline(), tr, time.Second)
		if err != nil {
			t.Errorf("TransferLeader: %v", err)
		}
		done <- id
	}()
	controllertest.WaitForTimers(t, clock, 1)
	select {
	case id := <-done:
		t.Fatalf("the wait ended before the clock moved: %q", id)
	default:
	}
	controllertest.AdvanceUntil(t, clock, 100*time.Millisecond, "the transfer wait to end", func() bool { return len(done) == 1 })
	if id := <-done; id != "n1" {
		t.Fatalf("after the wait: leader %q, want n1 (the target never won)", id)
	}
}

// TestRegisterDecisions: an unknown member and one whose raft address
// differs from raft's are refused; a known one is recorded.
func TestRegisterDecisions(t *testing.T) {
	s, _, l := newTestService(t)
	register := func(id, addr string) error {
		t.Helper()
		r, err := NewRegistration(&coordpb.RegisterMemberRequest{Id: id, RaftAddr: addr, GrpcAddr: "127.0.0.1:8003"})
		if err != nil {
			t.Fatalf("NewRegistration: %v", err)
		}
		return s.Register(l.Deadline(), r)
	}
	if err := register("ghost", "127.0.0.1:7"); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("unknown: %v", err)
	}
	if err := register("n3", "127.0.0.1:9999"); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "has raft address 127.0.0.1:7003") {
		t.Fatalf("other address: %v", err)
	}
	if err := register("n3", "127.0.0.1:7003"); err != nil {
		t.Fatal(err)
	}
	if m, ok := directory(l, "n3"); !ok || m.GrpcAddr != "127.0.0.1:8003" {
		t.Fatalf("directory %v", m)
	}
}
