package checker

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protodelim"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

func alloc(idx, client int, f string, count uint32, first uint64, invoke, complete int64) history.Op {
	in, _ := json.Marshal(AllocInput{Count: count})
	out, _ := json.Marshal(AllocOutput{First: first, Count: count})
	return history.Op{Index: idx, Client: client, F: f, Input: in, Type: history.Ok, Output: out, Invoke: invoke, Complete: complete}
}

func info(idx, client int, f string, invoke, complete int64) history.Op {
	in, _ := json.Marshal(AllocInput{Count: 1})
	return history.Op{Index: idx, Client: client, F: f, Input: in, Type: history.Info, Invoke: invoke, Complete: complete, Error: "DeadlineExceeded"}
}

func checkAll(t *testing.T, ops []history.Op, html string) (lin, rt, uniq Result) {
	t.Helper()
	lin = AllocLinearizable(ops, 30*time.Second, html, []Annotation{{Start: 0, End: 10, Tag: "nemesis", Text: "test"}})
	rt = AllocRealTime(ops)
	uniq = AllocUnique(ops)
	return
}

func TestAllocValidHistories(t *testing.T) {
	ops := []history.Op{
		alloc(0, 0, FAllocTS, 1, 100, 0, 10),
		alloc(1, 1, FAllocTS, 5, 101, 11, 20),
		// concurrent with each other: any order of values is fine
		alloc(2, 0, FAllocTS, 1, 200, 30, 50),
		alloc(3, 1, FAllocTS, 1, 150, 31, 40),
		// closed intervals: touching ops are concurrent
		alloc(4, 2, FAllocTS, 1, 120, 20, 25),
		// IDs are a separate allocator: small values are fine
		alloc(5, 0, FAllocID, 10, 1, 0, 5),
		alloc(6, 1, FAllocID, 1, 11, 6, 7),
		// unknown outcomes constrain nothing
		info(7, 2, FAllocTS, 60, 70),
		info(8, 2, FAllocID, 60, 70),
	}
	lin, rt, uniq := checkAll(t, ops, "")
	for _, r := range []Result{lin, rt, uniq} {
		if r.Verdict != Valid {
			t.Errorf("%v", r)
		}
	}
}

// TestAllocDecreasingTimestampCaught: a timestamp lower than one returned
// by an operation that had completed before is caught by porcupine and by
// the real-time checker, and porcupine's HTML page is written.
func TestAllocDecreasingTimestampCaught(t *testing.T) {
	ops := []history.Op{
		alloc(0, 0, FAllocTS, 1, 100, 0, 10),
		alloc(1, 1, FAllocTS, 1, 99, 11, 20), // went back
	}
	html := filepath.Join(t.TempDir(), "lin.html")
	lin, rt, uniq := checkAll(t, ops, html)
	if lin.Verdict != Invalid || rt.Verdict != Invalid {
		t.Fatalf("decreasing timestamp not caught:\n%v\n%v", lin, rt)
	}
	if uniq.Verdict != Valid {
		t.Fatalf("unique: %v", uniq)
	}
	if st, err := os.Stat(html); err != nil || st.Size() == 0 || lin.Artifact != html {
		t.Fatalf("no visualisation written: %v (artifact %q)", err, lin.Artifact)
	}
}

func TestAllocDuplicateCaught(t *testing.T) {
	// Concurrent, so real time allows any order, but a range overlap can
	// never be linearized as strictly increasing.
	ops := []history.Op{
		alloc(0, 0, FAllocID, 10, 1, 0, 10),
		alloc(1, 1, FAllocID, 1, 5, 2, 12),
	}
	lin, rt, uniq := checkAll(t, ops, "")
	if lin.Verdict != Invalid || uniq.Verdict != Invalid {
		t.Fatalf("duplicate ID not caught:\n%v\n%v", lin, uniq)
	}
	if rt.Verdict != Valid {
		t.Fatalf("real-time checker flagged concurrent ops: %v", rt)
	}
}

func TestAllocBadOutputCaught(t *testing.T) {
	o := alloc(0, 0, FAllocTS, 3, 100, 0, 10)
	o.Output, _ = json.Marshal(AllocOutput{First: 100, Count: 2})
	if r := AllocUnique([]history.Op{o}); r.Verdict != Invalid {
		t.Fatalf("short allocation not caught: %v", r)
	}
}

// simulate builds a linearizable history of n allocations by clients
// against an atomic allocator, with overlapping random latencies, and info
// operations that took values nobody saw.
func simulate(seed uint64, n, clients int) []history.Op {
	rng := rand.New(rand.NewPCG(seed, 1))
	type sim struct {
		op    history.Op
		point int64 // linearization point, inside [Invoke, Complete]
	}
	var ss []sim
	next := map[string]uint64{FAllocTS: 1 << 40, FAllocID: 1}
	clock := make([]int64, clients)
	for i := 0; i < n; i++ {
		c := rng.IntN(clients)
		f := FAllocTS
		if rng.IntN(2) == 0 {
			f = FAllocID
		}
		// Per-client clocks advance independently, so operations of
		// different clients overlap.
		invoke := clock[c] + rng.Int64N(1000)
		point := invoke + 1 + rng.Int64N(5000)
		complete := point + 1 + rng.Int64N(5000)
		clock[c] = complete + 1
		ss = append(ss, sim{op: history.Op{Index: i, Client: c, F: f, Invoke: invoke, Complete: complete}, point: point})
	}
	// Values follow the linearization points.
	sort.Slice(ss, func(i, j int) bool { return ss[i].point < ss[j].point })
	var ops []history.Op
	for _, s := range ss {
		o := s.op
		count := uint32(1 + rng.IntN(5))
		first := next[o.F]
		next[o.F] += uint64(count) + uint64(rng.IntN(3)) // gaps are fine
		o.Input, _ = json.Marshal(AllocInput{Count: count})
		if rng.IntN(20) == 0 {
			o.Type, o.Error = history.Info, "DeadlineExceeded"
		} else {
			o.Type = history.Ok
			o.Output, _ = json.Marshal(AllocOutput{First: first, Count: count})
		}
		ops = append(ops, o)
	}
	history.Sort(ops)
	return ops
}

// TestAllocSimulatedHistory: a large simulated history is valid; breaking
// one value (the kind of bug a deposed leader would cause) is caught.
func TestAllocSimulatedHistory(t *testing.T) {
	ops := simulate(7, 4000, 8)
	lin, rt, uniq := checkAll(t, ops, "")
	for _, r := range []Result{lin, rt, uniq} {
		if r.Verdict != Valid {
			t.Fatalf("simulated history rejected: %v", r)
		}
	}
	// Break it: late in the history, an ok timestamp returns the value of
	// an early one (stale leader served from an old window).
	var early, late = -1, -1
	for i, o := range ops {
		if o.F == FAllocTS && o.Type == history.Ok {
			if early < 0 {
				early = i
			}
			late = i
		}
	}
	broken := append([]history.Op(nil), ops...)
	broken[late].Output = broken[early].Output
	broken[late].Input = broken[early].Input
	lin, rt, uniq = checkAll(t, broken, filepath.Join(t.TempDir(), "lin.html"))
	for _, r := range []Result{lin, rt, uniq} {
		if r.Verdict != Invalid {
			t.Errorf("broken history accepted: %v", r)
		}
	}
}

func snapshot(t *testing.T, applied uint64, recs ...*logpb.SnapshotRecord) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(snapshotMagic)
	all := append([]*logpb.SnapshotRecord{{Record: &logpb.SnapshotRecord_Header{Header: &logpb.SnapshotHeader{
		FormatVersion: 1, AppliedIndex: applied, RecordCount: uint64(len(recs))}}}}, recs...)
	for _, r := range all {
		if _, err := protodelim.MarshalTo(&b, r); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

func allocRec(next uint64) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Allocator{Allocator: &logpb.AllocatorState{NextId: next}}}
}

func TestSnapshotsIdentical(t *testing.T) {
	a := snapshot(t, 10, allocRec(5))
	r, conv := SnapshotsIdentical(map[string][]byte{"n1": a, "n2": a, "n3": a})
	if r.Verdict != Valid || !conv {
		t.Fatalf("identical: %v", r)
	}
	r, conv = SnapshotsIdentical(map[string][]byte{"n1": a, "n2": snapshot(t, 11, allocRec(6))})
	if conv || r.Verdict == Invalid {
		t.Fatalf("different applied index should ask for a retry: %v conv=%v", r, conv)
	}
	r, conv = SnapshotsIdentical(map[string][]byte{"n1": a, "n2": snapshot(t, 10, allocRec(6))})
	if !conv || r.Verdict != Invalid {
		t.Fatalf("diverged replicas not caught: %v", r)
	}
	r, _ = SnapshotsIdentical(map[string][]byte{"n1": a, "n2": []byte("garbage")})
	if r.Verdict != Invalid {
		t.Fatalf("garbage accepted: %v", r)
	}
}

// TestRecordedHistoryMutations: a slice of a real recorded history (five
// members, two of them SIGKILLed mid-window) is valid as recorded; a
// decreasing timestamp or a repeated ID injected into it is caught.
func TestRecordedHistoryMutations(t *testing.T) {
	ops, err := history.ReadJSONL(filepath.Join("testdata", "alloc-kill-5.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lin, rt, uniq := checkAll(t, ops, "")
	for _, r := range []Result{lin, rt, uniq} {
		if r.Verdict != Valid {
			t.Fatalf("recorded history rejected: %v", r)
		}
	}
	okOf := func(f string) []int {
		var idx []int
		for i, o := range ops {
			if o.F == f && o.Type == history.Ok {
				idx = append(idx, i)
			}
		}
		return idx
	}
	decode := func(o history.Op) AllocOutput {
		var out AllocOutput
		if err := json.Unmarshal(o.Output, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}

	// A timestamp that went back: the last timestamp allocation returns a
	// value just below the first one's.
	ts := okOf(FAllocTS)
	broken := append([]history.Op(nil), ops...)
	first := decode(broken[ts[0]])
	last := decode(broken[ts[len(ts)-1]])
	broken[ts[len(ts)-1]].Output, _ = json.Marshal(AllocOutput{First: first.First - uint64(last.Count), Count: last.Count})
	if broken[ts[0]].Complete >= broken[ts[len(ts)-1]].Invoke {
		t.Fatal("fixture: first and last timestamp allocations overlap")
	}
	lin, rt, _ = checkAll(t, broken, "")
	if lin.Verdict != Invalid || rt.Verdict != Invalid {
		t.Fatalf("decreasing timestamp in a recorded history not caught:\n%v\n%v", lin, rt)
	}

	// An ID handed out twice: a late allocation repeats an early one.
	ids := okOf(FAllocID)
	broken = append([]history.Op(nil), ops...)
	broken[ids[len(ids)-1]].Output = broken[ids[0]].Output
	broken[ids[len(ids)-1]].Input = broken[ids[0]].Input
	lin, rt, uniq = checkAll(t, broken, "")
	if lin.Verdict != Invalid || rt.Verdict != Invalid || uniq.Verdict != Invalid {
		t.Fatalf("repeated ID in a recorded history not caught:\n%v\n%v\n%v", lin, rt, uniq)
	}
}
