package broadcaster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/vocab"
)

// TestBroadcastRequestCarriesItsRequestID: the request ID of a Broadcast
// reaches the broadcaster (which names the CreateBroadcast with it, so a
// resend creates no second task); one over the size limit is refused
// before anything is forwarded.
func TestBroadcastRequestCarriesItsRequestID(t *testing.T) {
	req := &coordpb.BroadcastRequest{MessageType: "CreateIndex", Payload: []byte("idx"), RequestId: "call-1"}
	br, err := NewRequest(req)
	if err != nil || br.req.RequestID != "call-1" {
		t.Fatalf("NewRequest = %+v, %v; want request ID call-1", br, err)
	}
	req.RequestId = strings.Repeat("x", vocab.MaxRequestIDBytes+1)
	if _, err := NewRequest(req); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("an oversized request ID: %v; want ErrInvalid", err)
	}
}

// Only what Check and NewAck made is run: a zero request or ack is
// refused as invalid and nothing is proposed.
func TestUncheckedRequestsAreRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.leader.Establish(t, testTerm)
	before := len(h.leader.Applied())
	if _, err := h.m.Broadcast(context.Background(), Checked{}); !errors.Is(err, commands.ErrInvalid) {
		t.Errorf("Broadcast of a zero request: %v; want ErrInvalid", err)
	}
	if err := h.m.Ack(context.Background(), Ack{}); !errors.Is(err, commands.ErrInvalid) {
		t.Errorf("Ack of a zero ack: %v; want ErrInvalid", err)
	}
	if err := CommitAck(context.Background(), h.leader, Ack{}); !errors.Is(err, commands.ErrInvalid) {
		t.Errorf("CommitAck of a zero ack: %v; want ErrInvalid", err)
	}
	if after := len(h.leader.Applied()); after != before {
		t.Errorf("%d commands applied; want none", after-before)
	}
}

// NewAck refuses an ack that names no streaming node session, or whose
// checkpoints Apply would refuse, and keeps the request's broadcast ID.
func TestNewAck(t *testing.T) {
	cp := []*coordpb.Checkpoint{{Vchannel: "by-dev-rootcoord-dml_0", Term: 1, TimeTick: 1}}
	for name, req := range map[string]*coordpb.AckRequest{
		"no node":       {BroadcastId: 1, Epoch: 1, Checkpoints: cp},
		"no epoch":      {BroadcastId: 1, NodeId: 1, Checkpoints: cp},
		"no checkpoint": {BroadcastId: 1, NodeId: 1, Epoch: 1},
	} {
		if _, err := NewAck(req); !errors.Is(err, commands.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	a, err := NewAck(&coordpb.AckRequest{BroadcastId: 9, NodeId: 1, Epoch: 2, Checkpoints: cp})
	if err != nil || a.id != 9 || a.Body().FromNode != 1 || a.Body().FromEpoch != 2 {
		t.Fatalf("NewAck = %+v, %v", a, err)
	}
}
