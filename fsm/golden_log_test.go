package fsm

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The command log is a versioned API: a log written by this version must
// replay, in every later version, to the same state and the same results.
// testdata/golden_log_v1.hex is such a log, recorded once from the entries
// below (every command type that existed when it was recorded, accepted
// and rejected cases, batched entries, request IDs, and a command of a
// type this version does not know but may skip); testdata/golden_state_v1.snap
// and testdata/golden_results_v1.txt are what it replays to. A failure here
// means a change to an apply function, the state or the snapshot encoding
// alters what an old log means: make the change compatible (a new command
// type or version) instead. Only a deliberate change of the snapshot
// encoding may rewrite the golden state, with -update-log; the log file
// itself is never rewritten once recorded (-update-log keeps it), except
// when it does not exist yet. Command types added later get their own
// golden log (v2, ...), so this one stays as recorded.

var updateLog = flag.Bool("update-log", false, "record testdata/golden_log_v1.hex if missing, and rewrite the golden state and results it replays to")

const (
	goldenLogFile     = "testdata/golden_log_v1.hex"
	goldenStateFile   = "testdata/golden_state_v1.snap"
	goldenResultsFile = "testdata/golden_results_v1.txt"
)

// unknownIgnorable is a command of a type from a newer version (in the
// 0x06xx block, with the Ignorable bit) that this version skips.
func unknownIgnorable() commands.Command {
	return commands.Command{Type: commands.Ignorable | 0x0600, Version: 3, RequestID: "newer-1", LeaderTerm: 2}
}

// goldenEntries is the log as first recorded. Each inner slice is one entry.
func goldenEntries(t testing.TB) [][]commands.Command {
	k := func(s string) string { return scopedKey(t)(vocab.CollectionScopedKey(5, s)) }
	var out [][]commands.Command
	one := func(cs ...commands.Command) {
		for _, c := range cs {
			out = append(out, []commands.Command{c})
		}
	}
	batch := func(cs ...commands.Command) { out = append(out, cs) }

	// Core: leadership, members, allocators (with request IDs: dedup).
	one(segBaseV1()...) // leader (term 2), nodes 1..3, streaming, p0→1, p1→2, collection 100
	batch(
		cmd(&logpb.UpsertMember{Member: &logpb.Member{Id: "c1", RaftAddr: "h:1", GrpcAddr: "h:11", HttpAddr: "h:21"}}, withTerm(2)),
		upsertMember("c2", "h:2", withTerm(2)),
		upsertMember("c3", "h:3", withTerm(2)),
	)
	one(
		extendTSO(5000, withRequestID("tso-1"), withTerm(2)),
		reserveIDs(100, withRequestID("ids-1"), withTerm(2)),
		reserveIDs(100, withRequestID("ids-1"), withTerm(2)), // a duplicate: the recorded result
		reserveIDs(0, withRequestID("ids-bad")),              // rejected
		removeMember("c3", withTerm(2)),
		extendTSO(4000, withTerm(2)), // stale: rejected
	)

	// Channels: every channel command, accepted and refused.
	p4 := vocab.PChannelName("dml", 4)
	one(
		addPCh(p4),
		assign(asg(p2, 3, 1), asgMode(p3, 1, ro, 1)),
		done(pt(p2, 2)),
		assignFailed(p3, 2, "deadline exceeded"),
		unavailable(ptr(p2, 2, "broken")),
		assign(asg(p2, 1, 2)),
		register("10.0.0.9:22222", "i9", withRequestID("reg-9")),
		drain(3, true, "upgrade"),
		drain(3, false, "done"),
		drain(9, true, "no such node"), // rejected
		allocV(200, 2),
		allocV(200, 2), // a repeat: the first placement
		allocV(300, 1),
		dropV(300),
		replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2, p3, p4), rcluster("dr", "d_0", "d_1", "d_2", "d_3", "d_4")}, edge(clusterID, "dr")),
	)

	// Segments on v0 (p0, node 1, term 2): create, seal, flush, save,
	// checkpoint, drop and prune.
	one(
		createSeg(v0, 1, 2),
		createSeg(v0, 1, 2),
		createSeg(v1, 2, 2),
		createSeg(v0, 3, 2), // wrong node: rejected
	)
	segs := goldenSegmentIDs
	one(
		sealSegs(2, 10, segs[0]),
		markFlushing(2, segs[0]),
		save(segs[0], 1, 50, 20, flushed),
		save(segs[1], 2, 10, 30),
		save(segs[1], 3, 0, 31, droppedSave, noBinlogs),
		cpUpdate(1, v0, 2, 40),
		sealColl(2, 50, coll),
	)
	batch(
		cmd(&logpb.PruneDroppedSegments{RetentionMs: 1000, MaxCount: 10, DecisionTerm: 2}, withProposedAt(1_000_000)),
		unknownIgnorable(),
		reserveIDs(1, withTerm(2)),
	)

	// Broadcasts: create, ack, complete, abandon, prune.
	one(
		createB(vocab.MsgFlushAll, withTargets(cch, p1, p2), withIK(k("flush"))),
		createB("CreateIndex", withTargets(cch, v15), withIK(k("idx")),
			withRK(rk(rkCollection, "db:c", false), rk(rkDB, "db", true))),
		createB("DropIndex", withIK(k("idx"))),
		createB("CreateIndex"),
	)
	bc := goldenBroadcastIDs
	one(
		ackB(bc[0], cpt(cch, 1, 1, 10), cpt(p1, 1, 1, 20), cpt(p2, 2, 1, 30)),
		ackB(bc[1], cpt(v15, 1, 2, 40)),
		completeB(bc[0], withProposedAt(70)),
		abandonB(bc[2], "operator", withProposedAt(60)),
		ackAll(bc[3], cch),
		completeB(bc[3], withProposedAt(80)),
		pruneB(1, 1_000_000, withProposedAt(100)),
	)

	// A leader change: decisions of the old term are refused after it.
	one(
		leaderEstablished(3, "c2", withProposedAt(200), withTerm(3)),
		sealSegs(2, 60, segs[1]), // decided in term 2: stale
		markDown(2, 5, "ttl"),
	)
	return out
}

// IDs the fixture's creates are given (checked against their results).
var (
	goldenSegmentIDs   = []int64{101, 102, 103}
	goldenBroadcastIDs = []uint64{105, 106, 107, 108}
)

// goldenLogEntry is one recorded entry.
type goldenLogEntry struct {
	index uint64
	data  []byte
}

// recordGoldenLog encodes the entries at sparse indexes (a real log has
// entries the state machine never sees: configuration changes, no-ops).
func recordGoldenLog(t *testing.T) []goldenLogEntry {
	var out []goldenLogEntry
	index := uint64(2)
	for i, e := range goldenEntries(t) {
		data, err := commands.EncodeEntry(e)
		if err != nil {
			t.Fatalf("encode entry %d: %v", i, err)
		}
		out = append(out, goldenLogEntry{index: index, data: data})
		index += 1 + uint64(i%3)
	}
	return out
}

func readGoldenLog(t *testing.T) []goldenLogEntry {
	t.Helper()
	f, err := os.Open(goldenLogFile)
	if err != nil {
		t.Fatalf("%v (record it with `go test -tags hashicorpmetrics ./fsm -run TestGoldenLog -update-log`)", err)
	}
	defer f.Close()
	var out []goldenLogEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for line := 1; sc.Scan(); line++ {
		idx, hx, ok := strings.Cut(sc.Text(), " ")
		index, err := strconv.ParseUint(idx, 10, 64)
		if !ok || err != nil {
			t.Fatalf("%s:%d: want INDEX HEX", goldenLogFile, line)
		}
		data, err := hex.DecodeString(hx)
		if err != nil {
			t.Fatalf("%s:%d: %v", goldenLogFile, line, err)
		}
		out = append(out, goldenLogEntry{index: index, data: data})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// replayGolden applies the log as a replica does (raw entry bytes) and
// returns the state and one line per result, rejection messages left out
// (they are for humans and may be reworded).
func replayGolden(t *testing.T, log []goldenLogEntry) (*State, []string) {
	t.Helper()
	s := New()
	var results []string
	for _, e := range log {
		next, rs, err := s.Apply(e.index, e.data)
		if err != nil {
			t.Fatalf("entry at index %d no longer applies: %v", e.index, err)
		}
		for i, r := range rs {
			r = proto.Clone(r).(*logpb.Result)
			if r.Rejection != nil {
				r.Rejection.Message = ""
			}
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			results = append(results, fmt.Sprintf("%d.%d [%x]", e.index, i, b))
		}
		s = next
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("invariants after the golden log: %v", err)
	}
	return s, results
}

// TestGoldenLogReplays replays the recorded log into a fresh state and
// compares the snapshot bytes and the results with the recorded ones.
func TestGoldenLogReplays(t *testing.T) {
	if *updateLog {
		if err := os.MkdirAll(filepath.Dir(goldenLogFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(goldenLogFile); os.IsNotExist(err) {
			var b strings.Builder
			for _, e := range recordGoldenLog(t) {
				fmt.Fprintf(&b, "%d %x\n", e.index, e.data)
			}
			if err := os.WriteFile(goldenLogFile, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s, results := replayGolden(t, readGoldenLog(t))
		if err := os.WriteFile(goldenStateFile, snapshotBytes(t, s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenResultsFile, []byte(strings.Join(results, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, results := replayGolden(t, readGoldenLog(t))
	want, err := os.ReadFile(goldenStateFile)
	if err != nil {
		t.Fatal(err)
	}
	if got := snapshotBytes(t, s); !bytes.Equal(got, want) {
		t.Errorf("the golden log replays to a different state (%d bytes, recorded %d): an old log would mean something else now", len(got), len(want))
	}
	wantResults, err := os.ReadFile(goldenResultsFile)
	if err != nil {
		t.Fatal(err)
	}
	wr := strings.Split(strings.TrimSpace(string(wantResults)), "\n")
	if len(wr) != len(results) {
		t.Fatalf("%d results, recorded %d", len(results), len(wr))
	}
	for i := range wr {
		if wr[i] != results[i] {
			t.Errorf("result %s, recorded %s", results[i], wr[i])
		}
	}
	// A restored replica reaches the same bytes.
	r, err := ReadSnapshot(bytes.NewReader(want))
	if err != nil {
		t.Fatalf("the golden state no longer reads: %v", err)
	}
	if !bytes.Equal(snapshotBytes(t, r), want) {
		t.Error("the golden state does not re-encode to itself")
	}
}

// TestGoldenLogCoverage: the recorded log holds every command type this
// package applied when it was recorded, each accepted at least once, and
// an ignorable command of an unknown type. A type added later is listed
// (it belongs in a new golden log), never a failure of this one; a recorded
// type that is no longer known is a failure (old logs would stop replicas).
func TestGoldenLogCoverage(t *testing.T) {
	log := readGoldenLog(t)
	accepted := map[commands.Type]int{}
	seen := map[commands.Type]int{}
	s := New()
	for _, e := range log {
		cmds, err := commands.DecodeEntry(e.data)
		if err != nil {
			t.Fatalf("entry %d: %v", e.index, err)
		}
		next, rs, err := s.Apply(e.index, e.data)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cmds {
			seen[c.Type]++
			if rs[i].GetRejection() == nil {
				accepted[c.Type]++
			}
			if _, ok := handlers[c.Type]; !ok && !c.Type.IsIgnorable() {
				t.Errorf("the golden log holds %s, which this version cannot apply", c.Type)
			}
		}
		s = next
	}
	var missing, rejectedOnly []string
	for typ := range handlers {
		switch {
		case seen[typ] == 0:
			missing = append(missing, typ.String())
		case accepted[typ] == 0:
			rejectedOnly = append(rejectedOnly, typ.String())
		}
	}
	sort.Strings(missing)
	sort.Strings(rejectedOnly)
	if len(rejectedOnly) > 0 {
		t.Errorf("types only ever rejected in the golden log: %v", rejectedOnly)
	}
	if len(missing) > 0 {
		t.Logf("types newer than golden log v1 (give them a golden log of their own): %v", missing)
	}
	if seen[unknownIgnorable().Type] != 1 {
		t.Error("the golden log lacks its ignorable command of an unknown type")
	}
	known := 0
	for typ := range seen {
		if _, ok := handlers[typ]; ok {
			known++
		}
	}
	if known < 28 {
		t.Errorf("the golden log covers %d known types; it was recorded with all 28 of v1", known)
	}
}
