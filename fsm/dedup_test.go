package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

func TestDedupRepeatReturnsFirstResult(t *testing.T) {
	tests := []struct {
		name     string
		first    commands.Command
		repeat   commands.Command
		want     *logpb.Result
		wantNext uint64
		sameTx   bool // both in one entry
	}{
		{
			name:     "same reservation twice",
			first:    reserveIDs(10, withRequestID("r1")),
			repeat:   reserveIDs(10, withRequestID("r1")),
			want:     rangeResult(1, 10),
			wantNext: 11,
		},
		{
			name:     "repeat inside one entry",
			first:    reserveIDs(10, withRequestID("r1")),
			repeat:   reserveIDs(10, withRequestID("r1")),
			want:     rangeResult(1, 10),
			wantNext: 11,
			sameTx:   true,
		},
		{
			name:     "a rejection is remembered too",
			first:    reserveIDs(0, withRequestID("r1")),
			repeat:   reserveIDs(0, withRequestID("r1")),
			want:     rejected(logpb.RejectCode_REJECT_INVALID),
			wantNext: 1,
		},
		{
			name:     "a retry stamped by another leader is the same request",
			first:    reserveIDs(10, withRequestID("r1"), withTerm(2), withProposedAt(1000)),
			repeat:   reserveIDs(10, withRequestID("r1"), withTerm(3), withProposedAt(5000)),
			want:     rangeResult(1, 10),
			wantNext: 11,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s *State
			var r1, r2 *logpb.Result
			if tt.sameTx {
				var rs []*logpb.Result
				s, rs = mustApply(t, New(), tt.first, tt.repeat)
				r1, r2 = rs[0], rs[1]
			} else {
				var rs []*logpb.Result
				s, rs = mustApply(t, New(), tt.first)
				r1 = rs[0]
				mid := s
				s, rs = mustApply(t, s, tt.repeat)
				r2 = rs[0]
				sameExceptApplied(t, mid, s)
			}
			checkResult(t, r1, tt.want, "")
			if !proto.Equal(r1, r2) {
				t.Fatalf("repeat returned %v, first returned %v", r2, r1)
			}
			if s.NextID() != tt.wantNext || s.TSOLimitPhysicalMs() != 0 {
				t.Fatalf("NextID %d (want %d), TSO %d (want 0): the repeat was applied", s.NextID(), tt.wantNext, s.TSOLimitPhysicalMs())
			}
			if got, ok := s.LookupRequest("r1"); !ok || !proto.Equal(got, r1) {
				t.Fatalf("LookupRequest(r1) = %v, %v; want %v", got, ok, r1)
			}
			if s.DedupLen() != 1 {
				t.Fatalf("DedupLen %d, want 1", s.DedupLen())
			}
		})
	}
}

func TestDedupWithoutRequestID(t *testing.T) {
	s, rs := mustApply(t, New(), reserveIDs(10), reserveIDs(10))
	checkResult(t, rs[0], rangeResult(1, 10), "")
	checkResult(t, rs[1], rangeResult(11, 10), "")
	if s.DedupLen() != 0 {
		t.Fatalf("DedupLen %d: commands without a request ID must not be remembered", s.DedupLen())
	}
	if _, ok := s.LookupRequest(""); ok {
		t.Fatal("the empty request ID is remembered")
	}
}

func reqID(i int) string { return fmt.Sprintf("req-%05d", i) }

// fillDedup applies n distinct request IDs (ReserveIDs of 1), batched, so
// request i gets ID i+1.
func fillDedup(t *testing.T, n int) *State {
	t.Helper()
	s := New()
	for i := 0; i < n; {
		var batch []commands.Command
		for ; i < n && len(batch) < commands.MaxCommandsPerEntry; i++ {
			batch = append(batch, reserveIDs(1, withRequestID(reqID(i))))
		}
		var err error
		if s, _, err = s.ApplyCommands(s.AppliedIndex()+1, batch...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDedupBoundedOldestEvicted(t *testing.T) {
	const extra = 10
	n := MaxDedupEntries + extra
	s := fillDedup(t, n)
	if s.DedupLen() != MaxDedupEntries {
		t.Fatalf("DedupLen %d, want %d", s.DedupLen(), MaxDedupEntries)
	}
	if s.NextID() != uint64(n)+1 {
		t.Fatalf("NextID %d, want %d", s.NextID(), n+1)
	}
	for i := 0; i < n; i++ {
		r, ok := s.LookupRequest(reqID(i))
		if i < extra {
			if ok {
				t.Fatalf("%s is still remembered; the oldest %d should be evicted", reqID(i), extra)
			}
			continue
		}
		if !ok || !proto.Equal(r, rangeResult(uint64(i)+1, 1)) {
			t.Fatalf("LookupRequest(%s) = %v, %v; want range %d", reqID(i), r, ok, i+1)
		}
	}

	// A remembered ID still deduplicates...
	s2, rs := mustApply(t, s, reserveIDs(1, withRequestID(reqID(extra))))
	checkResult(t, rs[0], rangeResult(extra+1, 1), "")
	sameExceptApplied(t, s, s2)

	// ...and a forgotten one applies again, evicting the now-oldest entry.
	s3, rs := mustApply(t, s2, reserveIDs(1, withRequestID(reqID(0))))
	checkResult(t, rs[0], rangeResult(uint64(n)+1, 1), "")
	if _, ok := s3.LookupRequest(reqID(extra)); ok {
		t.Fatalf("%s should have been evicted by the re-recorded %s", reqID(extra), reqID(0))
	}
	if _, ok := s3.LookupRequest(reqID(0)); !ok || s3.DedupLen() != MaxDedupEntries {
		t.Fatalf("after re-recording: remembered %v, DedupLen %d", ok, s3.DedupLen())
	}
}

func TestDedupSurvivesSnapshot(t *testing.T) {
	s := build(t,
		reserveIDs(10, withRequestID("a")),
		extendTSO(100, withRequestID("b")),
		extendTSO(50, withRequestID("c")), // stale: the rejection is remembered
		upsertMember("n1", "h:1"),
	)
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if restored.DedupLen() != 3 {
		t.Fatalf("restored DedupLen %d, want 3", restored.DedupLen())
	}
	for _, id := range []string{"a", "b", "c"} {
		want, _ := s.LookupRequest(id)
		got, ok := restored.LookupRequest(id)
		if !ok || !proto.Equal(got, want) {
			t.Fatalf("restored LookupRequest(%s) = %v, %v; want %v", id, got, ok, want)
		}
	}
	next, rs := mustApply(t, restored,
		reserveIDs(10, withRequestID("a")),
		extendTSO(100, withRequestID("b")),
		extendTSO(50, withRequestID("c")),
	)
	checkResult(t, rs[0], rangeResult(1, 10), "")
	checkResult(t, rs[1], numberResult(100), "")
	checkResult(t, rs[2], rejected(logpb.RejectCode_REJECT_STALE), "")
	sameExceptApplied(t, restored, next)
}

// TestDedupEvictionOrderSurvivesSnapshot: a restored full table evicts the
// same entries, in the same order, as the original.
func TestDedupEvictionOrderSurvivesSnapshot(t *testing.T) {
	s := fillDedup(t, MaxDedupEntries+10)
	restored, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	more := []commands.Command{
		reserveIDs(1, withRequestID("new-1")),
		reserveIDs(1, withRequestID(reqID(0))), // forgotten: applies again
		reserveIDs(1, withRequestID(reqID(11))),
		reserveIDs(1, withRequestID("new-2")),
	}
	a, ra := mustApply(t, s, more...)
	b, rb := mustApply(t, restored, more...)
	for i := range ra {
		if !proto.Equal(ra[i], rb[i]) {
			t.Fatalf("command %d: original %v, restored %v", i, ra[i], rb[i])
		}
	}
	if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
		t.Fatal("original and restored states diverged")
	}
	// Each new record evicts the oldest: new-1 evicts req-00010, req-00000
	// evicts req-00011, so the repeat of req-00011 applies again (and evicts
	// req-00012), and new-2 evicts req-00013.
	checkResult(t, rb[2], rangeResult(uint64(MaxDedupEntries)+10+3, 1), "")
	for _, gone := range []string{reqID(10), reqID(12), reqID(13)} {
		if _, ok := b.LookupRequest(gone); ok {
			t.Fatalf("%s should have been evicted", gone)
		}
	}
	for _, kept := range []string{"new-1", "new-2", reqID(0), reqID(11), reqID(14)} {
		if _, ok := b.LookupRequest(kept); !ok {
			t.Fatalf("%s should be remembered", kept)
		}
	}
}

// TestDedupRefusesReuseForAnotherRequest: a request ID stands for one
// request. Reusing it with another body or another type is refused as
// invalid and changes nothing; the first result stays remembered.
func TestDedupRefusesReuseForAnotherRequest(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, repeat commands.Command
	}{
		{"another body", reserveIDs(10, withRequestID("r1")), reserveIDs(99, withRequestID("r1"))},
		{"another type", reserveIDs(10, withRequestID("r1")), extendTSO(500, withRequestID("r1"))},
		{"after a rejection", reserveIDs(0, withRequestID("r1")), reserveIDs(10, withRequestID("r1"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rs := mustApply(t, New(), tc.first)
			first := rs[0]
			after, rs := mustApply(t, s, tc.repeat)
			checkResult(t, rs[0], rejected(logpb.RejectCode_REJECT_INVALID), `request_id "r1" was already used for a different request`)
			sameExceptApplied(t, s, after)
			if got, ok := after.LookupRequest("r1"); !ok || !proto.Equal(got, first) {
				t.Fatalf("LookupRequest(r1) = %v, %v; want the first result %v", got, ok, first)
			}
		})
	}
}

// TestDedupFingerprintSurvivesSnapshot: the fingerprint is part of the
// snapshot, so a restored replica refuses a reuse exactly as the original.
func TestDedupFingerprintSurvivesSnapshot(t *testing.T) {
	s, _ := mustApply(t, New(), reserveIDs(10, withRequestID("r1")))
	restored := restore(t, s)
	for _, st := range []*State{s, restored} {
		_, rs := mustApply(t, st, reserveIDs(99, withRequestID("r1")))
		checkResult(t, rs[0], rejected(logpb.RejectCode_REJECT_INVALID), "different request")
		_, rs = mustApply(t, st, reserveIDs(10, withRequestID("r1")))
		checkResult(t, rs[0], rangeResult(1, 10), "")
	}
}

// TestDedupLegacyRecordComparesType: a record restored from a snapshot
// written before fingerprints existed still answers a same-type repeat
// with the first result, and refuses another type.
func TestDedupLegacyRecordComparesType(t *testing.T) {
	s := New()
	s.dedup = s.dedup.record(&dedupEntry{RequestId: "old", Index: 1, Type: uint32(commands.TypeReserveIDs), Result: rangeResult(1, 10)})
	_, rs := mustApply(t, s, reserveIDs(77, withRequestID("old")))
	checkResult(t, rs[0], rangeResult(1, 10), "")
	_, rs = mustApply(t, s, extendTSO(500, withRequestID("old")))
	checkResult(t, rs[0], rejected(logpb.RejectCode_REJECT_INVALID), "different request")
}
