package raftnode_test

import (
	"testing"

	"github.com/coordd/coordd/commands/proposertest"
)

// TestNodeProposerConformance: the raft node reads a proposal as the
// controllers' fake leader does (controllertest runs the same checks).
func TestNodeProposerConformance(t *testing.T) {
	c := newCluster(t, 1)
	n := c.node(c.waitLeader())
	proposertest.Conformance(t, n, n.EstablishedTerm())
}
