package datadir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"
)

// VoteFile records, outside raft.db, the current term and vote that raft
// last stored durably in it.
//
// bolt keeps two meta pages and, when the newest is damaged, silently opens
// the transaction before it: raft.db then reads as if its last write never
// happened. For most writes that is indistinguishable from a crash during
// the write (a torn meta page at power loss, when the write was never
// acknowledged, and the older state is right). For a term or a vote it is
// dangerous: a member that forgot its vote may vote again in that term,
// for another candidate, and two leaders of one term follow.
//
// So every time raft stores a new term or vote, and only after raft.db has
// stored it durably, the member writes both into this file (fsynced, renamed
// into place, directory fsynced). raft.db can be ahead of the file (a crash
// between the two writes), never behind it: on start, a raft.db whose term
// or vote is older than the file's lost a durable transaction, and the data
// dir is refused (DamagedError). A crash during a raft.db write leaves the
// file at the previous value, so power loss is still accepted.
const VoteFile = "vote.json"

// voteRecord is VoteFile's content.
type voteRecord struct {
	CurrentTerm  uint64 `json:"current_term"`
	LastVoteTerm uint64 `json:"last_vote_term"`
	LastVoteCand string `json:"last_vote_cand,omitempty"`
}

// hashicorp/raft's stable-store keys.
var (
	keyLastVoteTerm = []byte("LastVoteTerm")
	keyLastVoteCand = []byte("LastVoteCand")
)

// recordingStable is the StableStore raft writes through: after each
// durable change of the term or the vote it rewrites VoteFile. A term or
// vote write returns only once raft.db and VoteFile both hold it, however
// long that takes (stable_wait.go): raft never sees an error from it.
type recordingStable struct {
	raft.StableStore
	dir string
	// writeRecord writes VoteFile (writeVoteRecord; tests inject failures).
	writeRecord func(dir string, rec voteRecord) error
	wait        stableWait

	mu  sync.Mutex
	rec voteRecord
}

func newRecordingStable(store raft.StableStore, dir string, rec voteRecord) *recordingStable {
	return &recordingStable{StableStore: store, dir: dir, writeRecord: writeVoteRecord, wait: newStableWait(), rec: rec}
}

func (s *recordingStable) SetUint64(key []byte, val uint64) error {
	switch {
	case bytes.Equal(key, keyCurrentTerm):
		s.wait.until("term", func() error { return s.storeTerm(val) })
	case bytes.Equal(key, keyLastVoteTerm):
		// Always followed by LastVoteCand: recorded in VoteFile then.
		s.wait.until("vote", func() error { return s.StableStore.SetUint64(key, val) })
	default:
		return s.StableStore.SetUint64(key, val)
	}
	return nil
}

func (s *recordingStable) Set(key, val []byte) error {
	if !bytes.Equal(key, keyLastVoteCand) {
		return s.StableStore.Set(key, val)
	}
	s.wait.until("vote", func() error { return s.storeVote(val) })
	return nil
}

// storeTerm writes the current term to raft.db, then to VoteFile. A term
// below the one raft.db holds is not written: raft asks for it only when
// two of its goroutines raced to raise the term (stable_wait.go), and the
// durable term must never go back (the newer one is kept, which says more).
func (s *recordingStable) storeTerm(term uint64) error {
	cur, err := s.StableStore.GetUint64(keyCurrentTerm)
	if err != nil && err.Error() != "not found" {
		return fmt.Errorf("read the current term from %s: %w", RaftDBFile, err)
	}
	if term < cur {
		s.wait.logger.Warn("kept the stored current term: raft asked for an older one", "stored", cur, "asked", term)
		return nil
	}
	if err := s.StableStore.SetUint64(keyCurrentTerm, term); err != nil {
		return fmt.Errorf("store the current term %d in %s: %w", term, RaftDBFile, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.rec
	next.CurrentTerm = term
	return s.save(next)
}

// storeVote writes the vote's candidate to raft.db, then the vote (with
// the term raft stored just before it) to VoteFile.
func (s *recordingStable) storeVote(cand []byte) error {
	if err := s.StableStore.Set(keyLastVoteCand, cand); err != nil {
		return fmt.Errorf("store the vote in %s: %w", RaftDBFile, err)
	}
	voteTerm, err := s.StableStore.GetUint64(keyLastVoteTerm)
	if err != nil {
		return fmt.Errorf("read back the vote's term: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.rec
	next.LastVoteTerm, next.LastVoteCand = voteTerm, string(cand)
	return s.save(next)
}

// save writes rec to VoteFile unless it holds it already; s.rec changes
// only once the write is durable.
func (s *recordingStable) save(rec voteRecord) error {
	if rec == s.rec {
		return nil
	}
	if err := s.writeRecord(s.dir, rec); err != nil {
		return err
	}
	s.rec = rec
	return nil
}

func writeVoteRecord(dir string, rec voteRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode %s: %w", VoteFile, err)
	}
	return writeFileDurably(dir, VoteFile, append(data, '\n'))
}

// loadVoteRecord reads VoteFile; ok is false when there is none (a new data
// dir, or one written by an older coordd).
func loadVoteRecord(dir string) (rec voteRecord, ok bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, VoteFile))
	if errors.Is(err, os.ErrNotExist) {
		return voteRecord{}, false, nil
	}
	if err != nil {
		return voteRecord{}, false, fmt.Errorf("read %s: %w", VoteFile, err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return voteRecord{}, false, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s is not valid: %v", VoteFile, err)}
	}
	return rec, true, nil
}

// storedVote reads the term and vote raft.db holds.
func storedVote(store raft.StableStore) (voteRecord, error) {
	var rec voteRecord
	var err error
	get := func(k []byte) uint64 {
		v, e := store.GetUint64(k)
		if e != nil && e.Error() != "not found" && err == nil {
			err = fmt.Errorf("read %s: %w", k, e)
		}
		return v
	}
	rec.CurrentTerm, rec.LastVoteTerm = get(keyCurrentTerm), get(keyLastVoteTerm)
	cand, e := store.Get(keyLastVoteCand)
	if e != nil && e.Error() != "not found" && err == nil {
		err = fmt.Errorf("read %s: %w", keyLastVoteCand, e)
	}
	rec.LastVoteCand = string(cand)
	return rec, err
}

// checkVote compares raft.db's term and vote with VoteFile and returns
// the StableStore raft must write through. skipCheck (the test-only switch
// that lets a data dir with lost raft state start) only records.
func checkVote(dir string, store raft.StableStore, skipCheck bool) (*recordingStable, error) {
	stored, err := storedVote(store)
	if err != nil {
		return nil, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s: %v", RaftDBFile, err)}
	}
	rec, ok, err := loadVoteRecord(dir)
	if err != nil {
		return nil, err
	}
	if ok && !skipCheck {
		if why := voteRollback(stored, rec); why != "" {
			return nil, &DamagedError{Dir: dir, Reason: fmt.Sprintf(
				"%s went back: %s, but %s recorded it after %s had stored it durably (a damaged newest bolt meta page, "+
					"or a %s copied from an older backup of this member); the member could vote twice in one term",
				RaftDBFile, why, VoteFile, RaftDBFile, RaftDBFile)}
		}
	}
	return newRecordingStable(store, dir, stored), nil
}

// voteRollback says how raft.db's stored term and vote are older than the
// recorded ones, or "".
func voteRollback(stored, rec voteRecord) string {
	switch {
	case stored.CurrentTerm < rec.CurrentTerm:
		return fmt.Sprintf("it holds current term %d, last recorded %d", stored.CurrentTerm, rec.CurrentTerm)
	case stored.LastVoteTerm < rec.LastVoteTerm:
		return fmt.Sprintf("its last vote is in term %d, last recorded in term %d", stored.LastVoteTerm, rec.LastVoteTerm)
	case stored.LastVoteTerm == rec.LastVoteTerm && rec.LastVoteCand != "" && stored.LastVoteCand != rec.LastVoteCand:
		return fmt.Sprintf("its vote in term %d is for %q, recorded for %q", rec.LastVoteTerm, stored.LastVoteCand, rec.LastVoteCand)
	}
	return ""
}
