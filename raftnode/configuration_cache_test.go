package raftnode

import (
	"testing"

	"github.com/hashicorp/raft"
)

// TestConfigCache: the cached slice is handed out again only for the same
// servers; any change (a member, an address, a suffrage) builds a new one.
func TestConfigCache(t *testing.T) {
	var c configCache
	base := []raft.Server{{ID: "a", Address: "h:1", Suffrage: raft.Voter}, {ID: "b", Address: "h:2", Suffrage: raft.Voter}}
	first := c.get(base)
	if len(first) != 2 || first[1] != (Server{ID: "b", RaftAddr: "h:2", Voter: true}) {
		t.Fatalf("get = %v", first)
	}
	if again := c.get(append([]raft.Server{}, base...)); &again[0] != &first[0] {
		t.Error("an equal configuration built a new slice; want the cached one")
	}
	for name, change := range map[string]func(s []raft.Server) []raft.Server{
		"address":  func(s []raft.Server) []raft.Server { s[1].Address = "h:3"; return s },
		"suffrage": func(s []raft.Server) []raft.Server { s[1].Suffrage = raft.Nonvoter; return s },
		"member":   func(s []raft.Server) []raft.Server { return append(s, raft.Server{ID: "c", Address: "h:4"}) },
		"removed":  func(s []raft.Server) []raft.Server { return s[:1] },
	} {
		c.get(base)
		changed := change(append([]raft.Server{}, base...))
		got := c.get(changed)
		if len(got) != len(changed) {
			t.Errorf("%s: %d servers; want %d", name, len(got), len(changed))
			continue
		}
		for i, s := range changed {
			if got[i] != (Server{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter}) {
				t.Errorf("%s: server %d = %v; want %v", name, i, got[i], s)
			}
		}
	}
}
