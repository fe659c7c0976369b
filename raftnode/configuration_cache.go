package raftnode

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// configCache keeps the last []Server that Configuration built, so a
// caller on a hot path (Status, on every call) gets raft's configuration
// without a new slice each time, and callers that cache what they build
// from it can tell "unchanged" from the slice's identity.
//
// Invariant: a cached slice is never modified after it is published, and
// it is handed out only while raft's latest configuration holds exactly
// the same servers (ID, address, suffrage, in order); it is compared on
// every call, so the cache can never be stale, whatever raft does with
// its own copies.
type configCache struct {
	cur atomic.Pointer[[]Server]
}

// get returns the cached slice when it matches servers, else a new one,
// which it caches.
func (c *configCache) get(servers []raft.Server) []Server {
	if p := c.cur.Load(); p != nil && sameServers(*p, servers) {
		return *p
	}
	out := make([]Server, 0, len(servers))
	for _, s := range servers {
		out = append(out, Server{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	c.cur.Store(&out)
	return out
}

func sameServers(have []Server, servers []raft.Server) bool {
	if len(have) != len(servers) {
		return false
	}
	for i, s := range servers {
		h := have[i]
		if h.ID != string(s.ID) || h.RaftAddr != string(s.Address) || h.Voter != (s.Suffrage == raft.Voter) {
			return false
		}
	}
	return true
}
