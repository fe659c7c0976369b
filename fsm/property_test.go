package fsm

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Small pools make collisions likely: repeated members, request IDs and
// terms, plus values the validators reject.
var (
	poolMemberIDs  = []string{"n1", "n2", "n3", "n1", "n2", "n1.x_y-z", "", "bad id"}
	poolAddrs      = []string{"127.0.0.1:7001", "h:2", "[::1]:9", "127.0.0.1:7001", "h:2", "", "h:0", "nohost"}
	poolRequestIDs = []string{"", "", "", "r0", "r1", "r2", "r3", "r4"}
	poolIDCounts   = []uint64{0, 1, 2, 7, 100, commands.MaxReserveIDs, commands.MaxReserveIDs + 1}
)

func genCommand(t *rapid.T, label string) commands.Command {
	memberID := func(name string) string { return rapid.SampledFrom(poolMemberIDs).Draw(t, label+name) }
	addr := func(name string) string { return rapid.SampledFrom(poolAddrs).Draw(t, label+name) }
	var c commands.Command
	switch kind := rapid.IntRange(0, 5).Draw(t, label+".kind"); kind {
	case 0:
		c = leaderEstablished(rapid.Uint64Range(0, 8).Draw(t, label+".term"), memberID(".leader"))
	case 1:
		var body logpb.UpsertMember
		if rapid.IntRange(0, 9).Draw(t, label+".hasMember") > 0 {
			body.Member = &logpb.Member{Id: memberID(".id"), RaftAddr: addr(".raft"), GrpcAddr: addr(".grpc"), HttpAddr: addr(".http")}
		}
		c = cmd(&body)
	case 2:
		c = removeMember(memberID(".id"))
	case 3:
		limit := rapid.OneOf(
			rapid.Int64Range(-2, 60),
			rapid.SampledFrom([]int64{1<<46 - 1, 1 << 46}),
		).Draw(t, label+".limit")
		c = extendTSO(limit)
	case 4:
		c = reserveIDs(rapid.SampledFrom(poolIDCounts).Draw(t, label+".count"))
	case 5:
		// A skippable command from a newer binary.
		c = commands.Command{Type: commands.Ignorable | commands.Type(rapid.Uint32Range(0x0700, 0x0702).Draw(t, label+".type")), Version: 1}
	default:
		t.Fatalf("kind %d", kind)
	}
	c.RequestID = rapid.SampledFrom(poolRequestIDs).Draw(t, label+".requestID")
	c.LeaderTerm = rapid.Uint64Range(0, 8).Draw(t, label+".leaderTerm")
	c.ProposedAtUnixMs = rapid.Int64Range(0, 1_000_000).Draw(t, label+".at")
	return c
}

type entry struct {
	index uint64
	data  []byte
}

// genEntries returns a log of encoded entries with increasing (sometimes
// skipping) indexes, starting after `after`.
func genEntries(t *rapid.T, label string, after uint64, maxEntries int) []entry {
	n := rapid.IntRange(1, maxEntries).Draw(t, label+".entries")
	out := make([]entry, 0, n)
	index := after
	for i := 0; i < n; i++ {
		index += rapid.Uint64Range(1, 3).Draw(t, fmt.Sprintf("%s[%d].gap", label, i))
		k := rapid.IntRange(1, 5).Draw(t, fmt.Sprintf("%s[%d].batch", label, i))
		cmds := make([]commands.Command, k)
		for j := range cmds {
			cmds[j] = genCommand(t, fmt.Sprintf("%s[%d][%d]", label, i, j))
		}
		data, err := commands.EncodeEntry(cmds)
		if err != nil {
			t.Fatalf("EncodeEntry: %v", err)
		}
		out = append(out, entry{index, data})
	}
	return out
}

// replay applies entries to s, checking the invariants after every apply and
// that the state applied to is left untouched. It returns the final state
// and every result in order.
func replay(t *rapid.T, s *State, entries []entry) (*State, []*logpb.Result) {
	var all []*logpb.Result
	for _, e := range entries {
		before := snapshotBytes(t, s)
		next, results, err := s.Apply(e.index, e.data)
		if err != nil {
			t.Fatalf("Apply(%d): %v", e.index, err)
		}
		if err := next.CheckInvariants(); err != nil {
			t.Fatalf("invariants after index %d: %v", e.index, err)
		}
		if err := Successor(s, next); err != nil {
			t.Fatalf("successor at index %d: %v", e.index, err)
		}
		if next.AppliedIndex() != e.index {
			t.Fatalf("applied index %d, want %d", next.AppliedIndex(), e.index)
		}
		if !bytes.Equal(before, snapshotBytes(t, s)) {
			t.Fatalf("Apply(%d) changed the previous state", e.index)
		}
		for i, r := range results {
			if r == nil {
				t.Fatalf("index %d command %d: nil result", e.index, i)
			}
		}
		all = append(all, results...)
		s = next
	}
	return s, all
}

func equalResults(t *rapid.T, what string, a, b []*logpb.Result) {
	if len(a) != len(b) {
		t.Fatalf("%s: %d results vs %d", what, len(a), len(b))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("%s: result %d differs: %v vs %v", what, i, a[i], b[i])
		}
	}
}

// checkRangesDisjoint: a reserved ID range is never handed out twice. A
// repeated request returns the identical range, which is fine.
func checkRangesDisjoint(t *rapid.T, results []*logpb.Result, nextID uint64) {
	byFirst := map[uint64]uint64{}
	for _, r := range results {
		ir := r.GetIdRange()
		if ir == nil {
			continue
		}
		if ir.Count == 0 {
			t.Fatalf("empty range %v", ir)
		}
		if c, seen := byFirst[ir.First]; seen && c != ir.Count {
			t.Fatalf("two ranges start at %d: counts %d and %d", ir.First, c, ir.Count)
		}
		byFirst[ir.First] = ir.Count
	}
	firsts := make([]uint64, 0, len(byFirst))
	for f := range byFirst {
		firsts = append(firsts, f)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	end := uint64(1)
	for _, f := range firsts {
		if f < end {
			t.Fatalf("range at %d overlaps an earlier range ending at %d", f, end)
		}
		end = f + byFirst[f]
	}
	if end > nextID {
		t.Fatalf("handed out IDs up to %d, but NextID is %d", end, nextID)
	}
}

// TestReplicasAgree: two replicas applying the same random log hold
// byte-identical states and return identical results.
func TestReplicasAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genEntries(t, "log", 0, 40)
		a, ra := replay(t, New(), log)
		b, rb := replay(t, New(), log)
		equalResults(t, "replicas", ra, rb)
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("replicas hold different states")
		}
		checkRangesDisjoint(t, ra, a.NextID())
		if a.DedupLen() > len(poolRequestIDs) {
			t.Fatalf("DedupLen %d with only %d distinct request IDs", a.DedupLen(), len(poolRequestIDs))
		}
	})
}

// TestSnapshotReplay: a state restored from a snapshot is indistinguishable
// from the original: same snapshot bytes, and the same results and states
// for any further log.
func TestSnapshotReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, prefixResults := replay(t, New(), genEntries(t, "prefix", 0, 30))
		data := snapshotBytes(t, s)
		r, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("ReadSnapshot: %v", err)
		}
		if err := r.CheckInvariants(); err != nil {
			t.Fatalf("restored invariants: %v", err)
		}
		if again := snapshotBytes(t, r); !bytes.Equal(again, data) {
			t.Fatal("snapshot -> restore -> snapshot changed the bytes")
		}
		suffix := genEntries(t, "suffix", s.AppliedIndex(), 20)
		a, ra := replay(t, s, suffix)
		b, rb := replay(t, r, suffix)
		equalResults(t, "original vs restored", ra, rb)
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("original and restored states diverged")
		}
		checkRangesDisjoint(t, append(prefixResults, ra...), a.NextID())
		// Applying the suffix did not change the snapshotted state.
		if !bytes.Equal(snapshotBytes(t, s), data) {
			t.Fatal("the snapshotted state changed after further applies")
		}
	})
}
