package checker

import (
	"encoding/json"
	"testing"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

func flushOp(i int, f string, t history.Type, out any, invoke, complete int64) history.Op {
	b, _ := json.Marshal(out)
	return history.Op{Index: i, F: f, Type: t, Output: b, Invoke: invoke, Complete: complete}
}

func TestFlushExactlyOnce(t *testing.T) {
	inserts := []history.Op{
		flushOp(0, FInsert, history.Ok, InsertOut{First: 1, Last: 3}, 0, 10),
		flushOp(1, FInsert, history.Info, nil, 0, 10), // pks 4..6 may or may not be persisted
		flushOp(2, FInsert, history.Ok, InsertOut{First: 7, Last: 8}, 0, 10),
	}
	good := append(append([]history.Op{}, inserts...), flushOp(3, FFinalRead, history.Ok, FinalRead{Counts: map[int64]int{1: 1, 2: 1, 3: 1, 5: 1, 7: 1, 8: 1}, Segments: 2}, 20, 30))
	if r := FlushExactlyOnce(good); r.Verdict != Valid {
		t.Fatalf("valid history judged %v", r)
	}
	lost := append(append([]history.Op{}, inserts...), flushOp(3, FFinalRead, history.Ok, FinalRead{Counts: map[int64]int{1: 1, 3: 1, 7: 1, 8: 1}}, 20, 30))
	if r := FlushExactlyOnce(lost); r.Verdict != Invalid || r.Violations != 1 {
		t.Fatalf("a lost acknowledged row was not caught: %v", r)
	}
	dup := append(append([]history.Op{}, inserts...), flushOp(3, FFinalRead, history.Ok, FinalRead{Counts: map[int64]int{1: 1, 2: 1, 3: 1, 5: 2, 7: 1, 8: 1}}, 20, 30))
	if r := FlushExactlyOnce(dup); r.Verdict != Invalid {
		t.Fatalf("a duplicated row was not caught: %v", r)
	}
	if r := FlushExactlyOnce(inserts); r.Verdict != Unknown {
		t.Fatalf("without a final read: %v", r)
	}
}

func TestFlushStateVsCheckpoints(t *testing.T) {
	ok := []history.Op{flushOp(0, FFlush, history.Ok, FlushOut{FlushTs: 100, Flushed: true, Checkpoints: map[string]uint64{"a": 100, "b": 150}}, 0, 1),
		flushOp(1, FFlush, history.Ok, FlushOut{FlushTs: 200, Flushed: false}, 2, 3)}
	if r := FlushStateVsCheckpoints(ok); r.Verdict != Valid {
		t.Fatal(r)
	}
	bad := []history.Op{flushOp(0, FFlush, history.Ok, FlushOut{FlushTs: 100, Flushed: true, Checkpoints: map[string]uint64{"a": 99, "b": 150}}, 0, 1)}
	if r := FlushStateVsCheckpoints(bad); r.Verdict != Invalid {
		t.Fatalf("flushed below a checkpoint was not caught: %v", r)
	}
}

func TestCheckpointsMonotonic(t *testing.T) {
	ops := []history.Op{
		flushOp(0, FCheckpoints, history.Ok, map[string]uint64{"a": 10, "b": 5}, 0, 10),
		flushOp(1, FCheckpoints, history.Ok, map[string]uint64{"a": 8}, 5, 15), // concurrent with op 0: any order
		flushOp(2, FCheckpoints, history.Ok, map[string]uint64{"a": 12, "b": 5}, 20, 30),
		flushOp(3, FFlush, history.Ok, FlushOut{FlushTs: 1, Flushed: true, Checkpoints: map[string]uint64{"a": 12}}, 31, 40),
	}
	if r := CheckpointsMonotonic(ops); r.Verdict != Valid {
		t.Fatal(r)
	}
	ops = append(ops, flushOp(4, FCheckpoints, history.Ok, map[string]uint64{"a": 11, "b": 6}, 41, 50))
	if r := CheckpointsMonotonic(ops); r.Verdict != Invalid || r.Violations != 1 {
		t.Fatalf("a checkpoint moving back was not caught: %v", r)
	}
}
