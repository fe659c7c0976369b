package channels

import (
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

func TestNodeDownName(t *testing.T) {
	if got := NodeStateName(logpb.NodeState_NODE_DOWN); got != NodeDown {
		t.Fatalf("NodeStateName(NODE_DOWN) = %q; NodeDown is %q", got, NodeDown)
	}
	if !IsDown(&logpb.StreamingNodeRecord{State: logpb.NodeState_NODE_DOWN}) || IsDown(&logpb.StreamingNodeRecord{State: logpb.NodeState_NODE_UP}) {
		t.Fatal("IsDown disagrees with the record's state")
	}
}
