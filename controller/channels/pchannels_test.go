package channels

import (
	"errors"
	"slices"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// TestAddPChannelsTriggersARound: new PChannels are committed, counted,
// and a balance round is asked for; a malformed request is ErrInvalid.
func TestAddPChannelsTriggersARound(t *testing.T) {
	rb := &fakeRebalancer{}
	s, l := newTestService(t, nil, rb)
	r, err := NewAddPChannels(&coordpb.AddPChannelsRequest{Names: []string{testP1, "by-dev-rootcoord-dml_2"}})
	if err != nil {
		t.Fatal(err)
	}
	added, err := s.AddPChannels(l.Deadline(), r)
	if err != nil || added != 1 {
		t.Fatalf("AddPChannels = %d, %v; want 1 new", added, err)
	}
	if rb.count() != 1 {
		t.Fatalf("%d rounds asked for, want 1", rb.count())
	}
	if _, err := NewAddPChannels(&coordpb.AddPChannelsRequest{Names: []string{""}}); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("empty name: %v, want ErrInvalid", err)
	}
}

// TestSetDrainShowsTheNode: a drained node is returned as the state shows
// it after the commit, with the PChannels it holds; undraining returns it
// to UP; an unknown node is refused by Apply.
func TestSetDrainShowsTheNode(t *testing.T) {
	s, l := newTestService(t, nil, nil)
	n := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:7301", Incarnation: "a"}).GetRegisterNode()
	p, _ := l.State().PChannel(testP0)
	a := l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: testP0, NodeId: n.NodeId, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term}}}).GetAssign().GetAssigned()
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: a})

	drain := func(id uint64, draining bool) (NodeView, error) {
		r, err := NewDrain(&coordpb.DrainNodeRequest{NodeId: id}, draining)
		if err != nil {
			t.Fatal(err)
		}
		return s.SetDrain(l.Deadline(), r)
	}
	v, err := drain(n.NodeId, true)
	if err != nil || v.Node.State != logpb.NodeState_NODE_DRAINING || v.Node.Reason != "operator request" || !slices.Equal(v.PChannels, []string{testP0}) {
		t.Fatalf("drain = %+v, %v; want DRAINING for \"operator request\" holding %s", v, err, testP0)
	}
	if v, err := drain(n.NodeId, false); err != nil || v.Node.State != logpb.NodeState_NODE_UP {
		t.Fatalf("undrain = %+v, %v; want UP", v, err)
	}
	var rej *commands.RejectedError
	if _, err := drain(999, true); !errors.As(err, &rej) || rej.Code != logpb.RejectCode_REJECT_NOT_FOUND {
		t.Fatalf("unknown node: %v, want a NOT_FOUND refusal", err)
	}
}

// TestHeldByNode: only ASSIGNED and ASSIGNING PChannels count as held.
func TestHeldByNode(t *testing.T) {
	_, l := newTestService(t, nil, nil)
	n := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:7301", Incarnation: "a"}).GetRegisterNode()
	p, _ := l.State().PChannel(testP1)
	l.MustPropose(t, &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: testP1, NodeId: n.NodeId, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term}}})
	held := HeldByNode(l.State())
	if len(held) != 1 || !slices.Equal(held[n.NodeId], []string{testP1}) {
		t.Fatalf("held %v, want node %d holding only the ASSIGNING %s", held, n.NodeId, testP1)
	}
}
