package datadir

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// damageNewestMeta flips a byte of the checksum of raft.db's meta page with
// the higher transaction ID, so bolt opens the transaction before it.
func damageNewestMeta(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, RaftDBFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ps := int(binary.LittleEndian.Uint32(b[24:])) // meta.pageSize, after the 16-byte page header
	txid := func(page int) uint64 { return binary.LittleEndian.Uint64(b[page*ps+64:]) }
	page := 0
	if txid(1) > txid(0) {
		page = 1
	}
	b[page*ps+72] ^= 0xff // meta.checksum
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func openTestStorage(t *testing.T, dir string) (*Storage, error) {
	t.Helper()
	return Open(Options{ID: "n1", Dir: dir})
}

// TestRolledBackTermOrVoteIsRefused: raft stores a term or a vote, then
// the newest bolt meta page is damaged, so raft.db opens at the write
// before. bolt reports nothing; the vote record catches it, and the data
// dir is refused with one line, not started with a term or vote the member
// already gave away (on a coordd without the record it opened, reading the
// older term: two votes in one term became possible).
func TestRolledBackTermOrVoteIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(t *testing.T, s *recordingStable)
		want  string
	}{
		{"term", func(t *testing.T, s *recordingStable) {
			for term := uint64(5); term <= 7; term++ {
				if err := s.SetUint64(keyCurrentTerm, term); err != nil {
					t.Fatal(err)
				}
			}
		}, "current term 6, last recorded 7"},
		{"vote", func(t *testing.T, s *recordingStable) {
			if err := s.SetUint64(keyCurrentTerm, 7); err != nil {
				t.Fatal(err)
			}
			if err := s.SetUint64(keyLastVoteTerm, 7); err != nil {
				t.Fatal(err)
			}
			if err := s.Set(keyLastVoteCand, []byte("n2")); err != nil {
				t.Fatal(err)
			}
		}, `its vote in term 7 is for "", recorded for "n2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := openTestStorage(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			tc.write(t, st.stable)
			st.Close()
			damageNewestMeta(t, dir)
			st, err = openTestStorage(t, dir)
			if err == nil {
				term, _ := st.store.GetUint64(keyCurrentTerm)
				st.Close()
				t.Fatalf("a data dir whose raft.db went back was accepted (current term reads %d)", term)
			}
			var de *DamagedError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %T %q: want a one-line DamagedError containing %q", err, err, tc.want)
			}
		})
	}
}

// TestTornTermWriteIsAccepted: a meta page torn while raft.db stored a
// term that was never recorded (power lost during the write, so raft never
// acted on it) is the previous state, correctly: the data dir opens.
func TestTornTermWriteIsAccepted(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStorage(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for term := uint64(5); term <= 6; term++ {
		if err := st.stable.SetUint64(keyCurrentTerm, term); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.store.SetUint64(keyCurrentTerm, 7); err != nil { // the write the crash cut short
		t.Fatal(err)
	}
	st.Close()
	damageNewestMeta(t, dir)
	st, err = openTestStorage(t, dir)
	if err != nil {
		t.Fatalf("a torn write of an unrecorded term was refused: %v", err)
	}
	defer st.Close()
	if term, _ := st.store.GetUint64(keyCurrentTerm); term != 6 {
		t.Fatalf("current term %d, want the last durable 6", term)
	}
}

// TestVoteRecordGarbledIsRefused: an unreadable vote record is damage,
// reported in one line.
func TestVoteRecordGarbledIsRefused(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStorage(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	st.stable.SetUint64(keyCurrentTerm, 3)
	st.Close()
	os.WriteFile(filepath.Join(dir, VoteFile), []byte("{garbage"), 0o600)
	_, err = openTestStorage(t, dir)
	var de *DamagedError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), VoteFile+" is not valid") {
		t.Fatalf("error %v: want a DamagedError naming %s", err, VoteFile)
	}
}

// BenchmarkVoteRecordWrite is the extra cost of one durable term or vote.
func BenchmarkVoteRecordWrite(b *testing.B) {
	dir := b.TempDir()
	rec := voteRecord{CurrentTerm: 1}
	for b.Loop() {
		rec.CurrentTerm++
		if err := writeVoteRecord(dir, rec); err != nil {
			b.Fatal(err)
		}
	}
}
