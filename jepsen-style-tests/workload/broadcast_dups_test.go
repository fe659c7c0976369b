package workload

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/streamingnode/wal"
)

const (
	dupVA   = "p1_200v0"
	dupVB   = "p2_200v0"
	dupCC   = "p1_vcchan"
	dupClms = nemesis.HostilePrefix + "claim-"
)

// dupHistory is a valid run: an acknowledged keyed call (broadcast 10,
// repeated with its key), an acknowledged call without a key (11), a call
// without a key whose outcome is unknown and whose task (12) landed, a
// call refused with a definite answer, a refused claim of broadcast 13
// and an accepted insert claim of broadcast 10 (a DML record in its own
// key space), and the final listing.
func dupHistory(t *testing.T) ([]history.Op, []walRec) {
	t.Helper()
	var ops []history.Op
	add := func(f string, typ history.Type, in, out any) {
		o := history.Op{Index: len(ops), F: f, Type: typ}
		o.Input, _ = json.Marshal(in)
		if out != nil {
			o.Output, _ = json.Marshal(out)
		}
		ops = append(ops, o)
	}
	keyed := BroadcastIn{Payload: "b0-0", VChannels: []string{dupVA, dupVB}, Key: "k0", Idem: "b0-0", IdemScope: 500}
	add("broadcast", history.Ok, keyed, BroadcastOut{ID: 10})
	add("broadcast", history.Ok, keyed, BroadcastOut{ID: 10, Duplicated: true})
	add("broadcast", history.Ok, BroadcastIn{Payload: "b0-1", VChannels: []string{dupVB, dupVA}, Key: "k1"}, BroadcastOut{ID: 11})
	add("broadcast", history.Info, BroadcastIn{Payload: "b1-0", VChannels: []string{dupVA}, Key: "k0"}, nil)
	add("broadcast", history.Fail, BroadcastIn{Payload: "b1-1", VChannels: []string{dupVB}, Key: "k1"}, nil)
	add(dupClms+"append", history.Fail, map[string]any{"target": dupVA, "broadcast_id": 13, "payload": "hostile-claim-13-claim-append"}, nil)
	add(dupClms+"insert", history.Ok, map[string]any{"target": dupVA, "broadcast_id": 10}, map[string]any{"term": 1, "offset": 9})
	add(FBroadcastTasks, history.Ok, nil, TaskList{Settled: true, Tasks: []TaskView{
		{ID: 10, Type: broadcastType, State: "TOMBSTONE", Idem: "coll/500/4:b0-0", VChannels: []string{dupVA, dupVB, dupCC}},
		{ID: 11, Type: broadcastType, State: "TOMBSTONE", VChannels: []string{dupVA, dupVB, dupCC}},
		{ID: 12, Type: broadcastType, State: "TOMBSTONE", VChannels: []string{dupVA, dupCC}},
	}})
	recs := []walRec{
		{VChannel: dupVA, Broadcast: 10, Payload: "b0-0"}, {VChannel: dupVB, Broadcast: 10, Payload: "b0-0"}, {VChannel: dupCC, Broadcast: 10, Payload: "b0-0"},
		{VChannel: dupVA, Broadcast: 11, Payload: "b0-1"}, {VChannel: dupVB, Broadcast: 11, Payload: "b0-1"}, {VChannel: dupCC, Broadcast: 11, Payload: "b0-1"},
		{VChannel: dupVA, Broadcast: 12, Payload: "b1-0"}, {VChannel: dupCC, Broadcast: 12, Payload: "b1-0"},
		{VChannel: dupVA, Dedup: 10, Payload: "DML"},
	}
	return ops, recs
}

func TestAtMostOnceValid(t *testing.T) {
	ops, recs := dupHistory(t)
	r := atMostOnce(ops, recs, nil, dupClms)
	if r.Verdict != checker.Valid {
		t.Fatalf("a history without duplicates judged %v", r)
	}
	for _, want := range []string{"4 calls (2 acknowledged, 1 unknown, 1 failed; 3 without idempotency key)", "0 duplicate records",
		"6 acknowledged messages found", "1 matched to their call by idempotency key", "append 1 refused 0 accepted 0 unknown 0 hits", "insert 0 refused 1 accepted 0 unknown 1 hits"} {
		if !strings.Contains(r.Summary, want) {
			t.Errorf("summary %q lacks %q", r.Summary, want)
		}
	}
}

// TestAtMostOnceCatches: each change to the valid run is one of the
// violations the checker exists for.
func TestAtMostOnceCatches(t *testing.T) {
	cases := []struct {
		name   string
		change func(ops []history.Op, recs []walRec) []walRec
		want   string
	}{
		{"an unknown call appended twice to one WAL (two tasks)", func(_ []history.Op, recs []walRec) []walRec {
			return append(recs, walRec{VChannel: dupVA, Broadcast: 14, Payload: "b1-0"})
		}, "is in the WAL of p1_200v0 2 times"},
		{"an acknowledged call resent as a second task elsewhere", func(_ []history.Op, recs []walRec) []walRec {
			return append(recs, walRec{VChannel: dupCC, Broadcast: 15, Payload: "b0-1"}) // not twice in one WAL: still two tasks
		}, "made 2 tasks: broadcasts [11 15]"},
		{"a keyed call whose key names a second task", func(ops []history.Op, recs []walRec) []walRec {
			var list TaskList
			_ = json.Unmarshal(ops[len(ops)-1].Output, &list)
			list.Tasks = append(list.Tasks, TaskView{ID: 16, Type: broadcastType, State: "PENDING", Idem: "coll/500/4:b0-0"})
			ops[len(ops)-1].Output, _ = json.Marshal(list)
			return recs
		}, "made 2 tasks: broadcasts [10 16]"},
		{"a failed call with a record", func(_ []history.Op, recs []walRec) []walRec {
			return append(recs, walRec{VChannel: dupVB, Broadcast: 17, Payload: "b1-1"})
		}, "failed with a definite answer"},
		{"a claim accepted under a real broadcast's key", func(_ []history.Op, recs []walRec) []walRec {
			for i := range recs {
				if recs[i].VChannel == dupVB && recs[i].Broadcast == 10 {
					recs[i].Payload = "hostile-claim-10-claim-append" // coordd's own append then came back Duplicate
				}
			}
			return recs
		}, "a forged record was accepted"},
		{"an acknowledged message missing from the CChannel", func(_ []history.Op, recs []walRec) []walRec {
			return recs[1:2:2] // only b0-0 in p2: the rest is gone
		}, "is not in the WAL of p1_200v0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops, recs := dupHistory(t)
			r := atMostOnce(ops, tc.change(ops, recs), nil, dupClms)
			if r.Verdict != checker.Invalid || !strings.Contains(strings.Join(r.Details, "\n"), tc.want) {
				t.Fatalf("want INVALID with %q, got %v", tc.want, r)
			}
		})
	}
}

// TestAtMostOnceReadsRealWALs: records written by the WAL writer are read
// back from the directory, and one payload under two broadcast IDs in one
// VChannel (what a resent call without an idempotency key leaves) is
// caught; without the second one the run is valid.
func TestAtMostOnceReadsRealWALs(t *testing.T) {
	for _, dup := range []bool{false, true} {
		dir := t.TempDir()
		w, err := wal.Open(dir, "p1", 1)
		if err != nil {
			t.Fatal(err)
		}
		ts := uint64(0)
		put := func(v string, id uint64, payload string) {
			ts++
			if _, err := w.Append(v, []byte(payload), id, ts); err != nil {
				t.Fatal(err)
			}
		}
		put(dupVA, 21, "b0-0")
		put(dupCC, 21, "b0-0")
		put("p1_200v1", 0, "a plain append")
		if dup {
			put(dupVA, 22, "b0-0")
			put(dupCC, 22, "b0-0")
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(BroadcastIn{Payload: "b0-0", VChannels: []string{dupVA}, Key: "k0"})
		out, _ := json.Marshal(BroadcastOut{ID: 21})
		ops := []history.Op{{F: "broadcast", Type: history.Ok, Input: in, Output: out}}
		recs, errs := readIDRecords(dir)
		r := atMostOnce(ops, recs, errs, "")
		if got := r.Verdict == checker.Invalid; got != dup {
			t.Fatalf("duplicate=%v: verdict %v", dup, r)
		}
	}
}

// The checker knows claims by their payload; it must be the nemesis'.
func TestClaimPayloadPrefixMatchesTheNemesis(t *testing.T) {
	if claimPayloadPrefix != nemesis.ClaimPayloadPrefix {
		t.Fatalf("workload's %q, nemesis' %q", claimPayloadPrefix, nemesis.ClaimPayloadPrefix)
	}
}
