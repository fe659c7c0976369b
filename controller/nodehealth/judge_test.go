package nodehealth

import (
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
)

// judge is a pure function of the nodes, the sessions and the time.
func TestJudgeDecidesFromViewAndTime(t *testing.T) {
	now := controllertest.Epoch
	up := func(id, epoch uint64) *logpb.StreamingNodeRecord {
		return &logpb.StreamingNodeRecord{Id: id, Epoch: epoch, State: logpb.NodeState_NODE_UP}
	}
	nodes := []*logpb.StreamingNodeRecord{
		up(1, 1), // fresh session
		up(2, 1), // exactly the TTL old: still within it
		up(3, 1), // one past the TTL: down
		up(4, 2), // session of another epoch: first seen now
		up(5, 1), // no session: first seen now
		{Id: 6, Epoch: 1, State: logpb.NodeState_NODE_DOWN}, // down already: not judged
	}
	sessions := map[uint64]*session{
		1: {epoch: 1, lastSeen: now},
		2: {epoch: 1, lastSeen: now.Add(-ttl)},
		3: {epoch: 1, lastSeen: now.Add(-ttl - time.Millisecond)},
		4: {epoch: 1, lastSeen: now.Add(-time.Hour)},
		6: {epoch: 1, lastSeen: now.Add(-time.Hour)},
	}
	v := judge(nodes, sessions, now, ttl)
	if ids := idsOf(v.down); len(ids) != 1 || ids[0] != 3 {
		t.Fatalf("down %v, want [3]", ids)
	}
	if ids := idsOf(v.firstSeen); len(ids) != 2 || ids[0] != 4 || ids[1] != 5 {
		t.Fatalf("first seen %v, want [4 5]", ids)
	}
	if len(sessions) != 5 {
		t.Fatalf("judge changed the sessions: %d", len(sessions))
	}
}

func idsOf(ns []*logpb.StreamingNodeRecord) []uint64 {
	var out []uint64
	for _, n := range ns {
		out = append(out, n.Id)
	}
	return out
}
