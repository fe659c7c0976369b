package controllertest

import (
	"testing"

	"github.com/coordd/coordd/commands/proposertest"
)

// TestLeaderProposerConformance: the fake leader reads a proposal as the
// raft node does (raftnode runs the same checks).
func TestLeaderProposerConformance(t *testing.T) {
	proposertest.Conformance(t, NewLeader(t, NewClock(), 5), 5)
}
