package controllertest

import (
	"testing"

	"github.com/coordd/coordd/commands/proposertest"
)

// TestLeaderProposerConformance: the fake leader reads a proposal as the
// raft node does (raftnode runs the same checks).
func TestLeaderProposerConformance(t *testing.T) {
	l := NewLeader(t, NewClock(), 5)
	proposertest.Conformance(t, proposertest.Subject{P: l, Term: 5, Saturate: func(*testing.T) func() {
		l.SetQueueFull(true)
		return func() { l.SetQueueFull(false) }
	}})
}
