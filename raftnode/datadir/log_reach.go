package datadir

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/durable"
)

// LogReachFile records how far this member's raft log reached, so that a
// log which later falls short of it is refused at start-up instead of
// served (docs/operations.md#what-the-start-up-checks-see).
//
// Neither log store can tell a lost tail from one never written: raft-wal
// preallocates its segments, so zeros over the tail of the newest one, or
// an emptied wal/ directory, read as a clean, shorter log; bolt opens the
// older meta page when the newest is damaged, which reads as if its last
// transactions never happened. A member that restarted on such a log would
// have forgotten entries it acknowledged, and with a majority of such
// members an acknowledged write is lost on every member.
//
// The record is written with every append, concurrently with it (one more
// fdatasync, overlapping the log's own): it says "every entry up to Held was
// durable before this batch; the batch runs to End". The invariant checked
// at start-up is
//
//	max(last log index, newest intact snapshot index) >= Held
//
// of the newest intact record. Only the one batch that was being written
// when the member stopped (Held+1..End) may be missing: it may be torn,
// and it was never acknowledged unless its append returned, which needs
// both writes. That last batch is the one loss the record cannot see.
//
// Raft shortens a log legitimately in one way: it deletes a conflicting
// suffix of uncommitted entries (or, after installing a snapshot on a
// monotonic store, the whole log). Before such a deletion the record is
// lowered durably, so a crash in between leaves a record that is still
// true. Compaction deletes a prefix and does not touch the record.
//
// The file holds two 64-byte slots, written alternately in place (no new
// blocks, so it needs no free space), each with a sequence number and a
// CRC-32C: a write torn at power loss leaves the other, older slot, whose
// smaller Held is still true. raft.db's keyLogReach says the file exists,
// so a data dir that lost it is refused too.
const LogReachFile = "log-reach"

// keyLogReach marks, in raft.db, a data dir that keeps LogReachFile.
var keyLogReach = []byte("coordd.LogReach")

const (
	reachSlotLen  = 64
	reachMagic    = 0x68636572 // "rech"
	reachVersion  = 1
	reachBodyLen  = 32 // magic, version, pad, seq, held, end
	reachChecksum = reachBodyLen
)

// reachRecord is one slot's content.
type reachRecord struct {
	Seq  uint64 // increases with every write; the newest intact slot wins
	Held uint64 // every entry up to Held was durable when it was written
	End  uint64 // the last index of the batch written with it (>= Held)
}

func (r reachRecord) encode() []byte {
	b := make([]byte, reachSlotLen)
	binary.LittleEndian.PutUint32(b[0:], reachMagic)
	b[4] = reachVersion
	binary.LittleEndian.PutUint64(b[8:], r.Seq)
	binary.LittleEndian.PutUint64(b[16:], r.Held)
	binary.LittleEndian.PutUint64(b[24:], r.End)
	binary.LittleEndian.PutUint32(b[reachChecksum:], crc32.Checksum(b[:reachBodyLen], castagnoli))
	return b
}

// decodeReachSlot reads one slot; ok is false for a slot never written or
// torn (bad magic or checksum).
func decodeReachSlot(b []byte) (r reachRecord, ok bool) {
	if len(b) < reachSlotLen || binary.LittleEndian.Uint32(b[0:]) != reachMagic || b[4] != reachVersion {
		return r, false
	}
	if crc32.Checksum(b[:reachBodyLen], castagnoli) != binary.LittleEndian.Uint32(b[reachChecksum:]) {
		return r, false
	}
	r = reachRecord{Seq: binary.LittleEndian.Uint64(b[8:]), Held: binary.LittleEndian.Uint64(b[16:]), End: binary.LittleEndian.Uint64(b[24:])}
	return r, r.Seq > 0 && r.End >= r.Held
}

// loadLogReach reads the newest intact record of dir's LogReachFile.
// exists is false when there is no file; a file with no intact slot is
// damage.
func loadLogReach(dir string) (rec reachRecord, exists bool, err error) {
	data, err := os.ReadFile(filepath.Join(dir, LogReachFile))
	if errors.Is(err, os.ErrNotExist) {
		return rec, false, nil
	}
	if err != nil {
		return rec, false, fmt.Errorf("read %s: %w", LogReachFile, err)
	}
	found := false
	for off := 0; off+reachSlotLen <= len(data) && off < 2*reachSlotLen; off += reachSlotLen {
		if r, ok := decodeReachSlot(data[off : off+reachSlotLen]); ok && r.Seq > rec.Seq {
			rec, found = r, true
		}
	}
	if !found {
		return rec, true, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s holds no intact record of how far the raft log reached", LogReachFile)}
	}
	return rec, true, nil
}

// checkLogReach refuses a log that ends before what the member recorded
// (see LogReachFile). kept says raft.db marks the data dir as keeping the
// record.
func checkLogReach(dir string, rep storageReport, kept bool, logger interface{ Info(string, ...any) }) error {
	rec, exists, err := loadLogReach(dir)
	if err != nil {
		return err
	}
	if !exists {
		if kept {
			return &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s is missing, though %s says this member keeps it: "+
				"how far its raft log reached cannot be checked", LogReachFile, RaftDBFile)}
		}
		return nil // a data dir from before the record, or a new one
	}
	reach := max(rep.lastIndex, rep.usableSnap)
	if reach < rec.Held {
		where := WALDir + "/"
		if rep.recordedLogStore() == LogStoreBolt {
			where = RaftDBFile
		}
		return &DamagedError{Dir: dir, Reason: fmt.Sprintf("the raft log in %s ends at index %d (newest intact snapshot: %d), "+
			"but this member had stored entries up to index %d durably (%s): entries %d..%d are gone "+
			"(an emptied or cut log, zeros over written entries, or a file restored from an older copy)",
			where, rep.lastIndex, rep.usableSnap, rec.Held, LogReachFile, reach+1, rec.Held)}
	}
	if rep.lastIndex < rec.End && logger != nil {
		logger.Info("the last log batch was not completely written when the member stopped; it was never acknowledged",
			"batch_first", rec.Held+1, "batch_last", rec.End, "log_last", rep.lastIndex)
	}
	return nil
}

// reachFile writes LogReachFile.
type reachFile struct {
	f   *os.File
	seq uint64
}

// openReachFile opens dir's LogReachFile for writing, creating it (durably,
// before raft.db is told it exists) with a record that the log reaches
// last.
func openReachFile(dir string, rec reachRecord, exists bool, last uint64) (*reachFile, error) {
	path := filepath.Join(dir, LogReachFile)
	if !exists {
		init := reachRecord{Seq: 1, Held: last, End: last}
		data := append(init.encode(), make([]byte, reachSlotLen)...)
		if err := writeFileDurably(dir, LogReachFile, data); err != nil {
			return nil, err
		}
		rec = init
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &reachFile{f: f, seq: rec.Seq}, nil
}

// write stores held and end durably in the slot the previous write did
// not use.
func (r *reachFile) write(held, end uint64) error {
	next := reachRecord{Seq: r.seq + 1, Held: held, End: end}
	if _, err := r.f.WriteAt(next.encode(), int64(next.Seq%2)*reachSlotLen); err != nil {
		return fmt.Errorf("write %s: %w", LogReachFile, err)
	}
	if err := durable.Fdatasync(r.f); err != nil {
		return fmt.Errorf("fdatasync %s: %w", LogReachFile, err)
	}
	r.seq = next.Seq
	return nil
}

func (r *reachFile) close() error { return r.f.Close() }

// reachingLogStore keeps LogReachFile up to date with the log it wraps
// (see LogReachFile). Raft appends and deletes a suffix from its main
// goroutine and compacts from its snapshot goroutine; mu orders the first
// two, compaction passes through.
type reachingLogStore struct {
	raft.LogStore
	rec *reachFile

	mu   sync.Mutex
	last uint64 // the log's last index as of the last successful change
	held uint64 // Held of the newest record written
}

func newReachingLogStore(logs raft.LogStore, rec *reachFile, last, held uint64) *reachingLogStore {
	return &reachingLogStore{LogStore: logs, rec: rec, last: last, held: held}
}

// IsMonotonic passes on whether the wrapped store tolerates gaps
// (raft.MonotonicLogStore).
func (s *reachingLogStore) IsMonotonic() bool {
	m, ok := s.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

func (s *reachingLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends ls and, concurrently, records that everything before
// them was durable. It returns once both are durable.
func (s *reachingLogStore) StoreLogs(ls []*raft.Log) error {
	if len(ls) == 0 {
		return s.LogStore.StoreLogs(ls)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	held := min(s.last, ls[0].Index-1)
	end := ls[len(ls)-1].Index
	recorded := make(chan error, 1)
	go func() { recorded <- s.rec.write(held, end) }()
	err := s.LogStore.StoreLogs(ls)
	rerr := <-recorded
	if rerr == nil {
		s.held = held
	}
	if err != nil {
		return err
	}
	s.last = end
	return rerr
}

// DeleteRange lowers the record before raft removes the log's tail; a
// prefix (compaction) is deleted as it is.
func (s *reachingLogStore) DeleteRange(lo, hi uint64) error {
	s.mu.Lock()
	if lo == 0 || hi < s.last {
		s.mu.Unlock()
		return s.LogStore.DeleteRange(lo, hi)
	}
	defer s.mu.Unlock()
	if s.held > lo-1 {
		if err := s.rec.write(lo-1, lo-1); err != nil {
			return fmt.Errorf("lower the recorded reach of the log before deleting entries %d..%d: %w", lo, hi, err)
		}
		s.held = lo - 1
	}
	if err := s.LogStore.DeleteRange(lo, hi); err != nil {
		return err
	}
	s.last = lo - 1
	return nil
}

// keepLogReach puts the writer of LogReachFile in front of st's log: it
// opens the file (creating it for a data dir that has none, then marking
// raft.db) with the newest record as it stands.
func keepLogReach(st *Storage, kept bool) error {
	rec, exists, err := loadLogReach(st.dir)
	if err != nil && kept {
		return err
	}
	if err != nil {
		exists = false // a test-only skip, or a file raft.db never vouched for: start it anew
	}
	last, err := st.logs.LastIndex()
	if err != nil {
		return fmt.Errorf("read the last index of the raft log: %w", err)
	}
	if exists && rec.Held > last {
		// Only reachable with the checks skipped (tests): the next
		// append records what is really there.
		rec.Held = last
	}
	rf, err := openReachFile(st.dir, rec, exists, last)
	if err != nil {
		return err
	}
	if !kept {
		if err := st.store.Set(keyLogReach, []byte{1}); err != nil {
			rf.close()
			return fmt.Errorf("record in %s that %s is kept: %w", RaftDBFile, LogReachFile, err)
		}
	}
	st.reach = rf
	if !exists {
		rec.Held = last
	}
	st.logs = newReachingLogStore(st.logs, rf, last, rec.Held)
	return nil
}
