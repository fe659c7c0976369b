package leadership

import (
	"errors"
	"fmt"
	"testing"
)

func TestNotLeaderErrorIsErrNotLeader(t *testing.T) {
	err := fmt.Errorf("propose: %w", &NotLeaderError{LeaderID: "n2", LeaderAddr: "127.0.0.1:7000"})
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("%v is not ErrNotLeader", err)
	}
	var nl *NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderID != "n2" {
		t.Fatalf("leader hint lost: %v", err)
	}
	if got := (&NotLeaderError{}).Error(); got != "not the leader; no leader is known" {
		t.Fatalf("no hint: %q", got)
	}
	if errors.Is(ErrNotEstablished, ErrNotLeader) || errors.Is(ErrOutcomeUnknown, ErrNotLeader) {
		t.Fatal("distinct conditions must not match each other")
	}
}
