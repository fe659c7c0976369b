package raftnode

import (
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestTransferTimeoutIsAnUnknownOutcome: raft's transfer timeout may come
// after the TimeoutNow reached its target, which can still win its
// election; it is answered as an unknown outcome, not as a failure (the
// API said Internal before). A transfer refused before it started stays a
// definite answer.
func TestTransferTimeoutIsAnUnknownOutcome(t *testing.T) {
	n := &Node{logger: hclog.NewNullLogger()}
	if err := n.transferError(errors.New(raftTransferTimeout)); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("timeout: %v, want an unknown outcome", err)
	}
	if err := n.transferError(raft.ErrLeadershipLost); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("leadership lost: %v, want an unknown outcome", err)
	}
	for _, definite := range []error{raft.ErrLeadershipTransferInProgress, errors.New("cannot find peer")} {
		if err := n.transferError(definite); errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("%v: answered as an unknown outcome", definite)
		}
	}
}
