package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/coordd/coordd/durable"
)

const (
	lockName  = "lock"
	fenceName = "fence"
	logName   = "log"
)

// AppendResult describes an appended (or deduplicated) record.
type AppendResult struct {
	ID        MessageID
	Timestamp uint64
	// Duplicate: a record with the same (key space, ID, vchannel) was
	// already in the log (dedup.go); ID and Timestamp are that record's and
	// nothing was written.
	Duplicate bool
}

// Writer appends to one PChannel's log at one term. It is safe for
// concurrent use; appends are serialized (within the process by a mutex,
// across processes by the exclusive flock), and concurrent appends share
// one write and one fdatasync (group commit, see Enqueue).
type Writer struct {
	pchannel string
	dir      string // <dir>/<pchannel>
	logPath  string
	term     int64

	mu        sync.Mutex
	lock      *os.File
	log       *os.File
	st        scanPos
	index     map[dedupKey]dedupVal
	truncated int64
	closed    bool
	broken    error  // set after a failure that leaves the file in doubt
	noFence   bool   // test only: Append ignores the fence (UnsafeSkipFence)
	scratch   []byte // the last encoded batch's buffer, reused by the next one

	// The group-commit queue (group.go): appends wait here in the order
	// they were enqueued; one of their callers at a time (the leader)
	// writes everything queued with one write and one fdatasync.
	qmu     sync.Mutex
	queue   []*Pending
	leading bool

	// Counters and test hooks, read and set by tests and benchmarks.
	syncs      atomic.Uint64 // fdatasyncs of appended batches
	maxBatch   int           // records per batch (0: maxBatchRecords); 1 = one fsync per append
	beforeSync func()        // runs before a batch's fdatasync, under w.mu
}

// maxScratch bounds the encoding buffer a Writer keeps between appends, so
// one huge record does not pin its size for the writer's life.
const maxScratch = 1 << 20

// UnsafeSkipFence breaks the writer on purpose (tests of the tests only):
// its appends no longer check the fence or the log's newest term, so a
// deposed writer keeps writing at its old term.
func (w *Writer) UnsafeSkipFence() {
	w.mu.Lock()
	w.noFence = true
	w.mu.Unlock()
}

// Open opens pchannel's log under dir at term. It refuses (ErrFenced) when
// a higher term has already been opened, raises the fence to term, scans the
// log (truncating a torn tail) and returns a Writer positioned at the next
// offset. Opening at the current fence term again is allowed.
func Open(dir, pchannel string, term int64) (*Writer, error) {
	if err := ValidatePChannel(pchannel); err != nil {
		return nil, err
	}
	if term < 1 {
		return nil, invalidf("term must be positive, got %d", term)
	}
	pdir := filepath.Join(dir, pchannel)
	if err := mkdirDurable(dir, pdir); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(pdir, lockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	w := &Writer{pchannel: pchannel, dir: pdir, logPath: filepath.Join(pdir, logName), term: term,
		lock: lock, index: map[dedupKey]dedupVal{}}
	if err := w.open(); err != nil {
		w.lock.Close()
		if w.log != nil {
			w.log.Close()
		}
		return nil, err
	}
	return w, nil
}

func (w *Writer) open() error {
	if err := flock(w.lock, syscall.LOCK_EX); err != nil {
		return err
	}
	defer flock(w.lock, syscall.LOCK_UN)
	fence, err := readFence(w.dir)
	if err != nil {
		return err
	}
	if w.term < fence {
		return &FencedError{PChannel: w.pchannel, Fence: fence, Term: w.term}
	}
	_, statErr := os.Stat(w.logPath)
	log, err := os.OpenFile(w.logPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	w.log = log
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(w.dir); err != nil {
			return err
		}
	}
	if err := w.catchUp(); err != nil {
		return err
	}
	// The fence file is the authority, but never let a term below one already
	// in the log write again (the fence file could have been lost).
	if w.st.lastTerm > w.term {
		return &FencedError{PChannel: w.pchannel, Fence: w.st.lastTerm, Term: w.term}
	}
	if w.term > fence {
		return writeFence(w.dir, w.term)
	}
	return nil
}

// catchUp indexes records appended since the last scan (by this or any
// other writer) and truncates a torn tail. The caller holds the exclusive
// flock.
func (w *Writer) catchUp() error {
	fi, err := w.log.Stat()
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	size := fi.Size()
	if size < w.st.pos {
		return &CorruptError{Path: w.logPath, Pos: size, Reason: fmt.Sprintf("log shrank below %d bytes", w.st.pos)}
	}
	torn, err := scan(w.log, w.logPath, size, &w.st, 0, func(r *Record) {
		if k, ok := keyOf(r.Payload, r.dedupID(), r.VChannel); ok {
			w.index[k] = dedupVal{r.ID, r.Timestamp}
		}
	})
	if err != nil {
		return err
	}
	if torn {
		if err := w.log.Truncate(w.st.pos); err != nil {
			return fmt.Errorf("wal: truncate torn tail: %w", err)
		}
		if err := durable.Fdatasync(w.log); err != nil {
			return fmt.Errorf("wal: sync after truncating torn tail: %w", err)
		}
		w.truncated += size - w.st.pos
	}
	return nil
}

// PChannel is the log's PChannel.
func (w *Writer) PChannel() string { return w.pchannel }

// Term is the term this writer holds.
func (w *Writer) Term() int64 { return w.term }

// NextOffset is the offset the next append gets, as of this writer's last
// Open or Append (other writers may have appended since).
func (w *Writer) NextOffset() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.next
}

// LastTimestamp is the timestamp of the last record, as of this writer's
// last Open or Append (0 for an empty log).
func (w *Writer) LastTimestamp() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.lastTS
}

// Syncs is how many fdatasyncs this writer's appends made: with appends
// sharing them (group commit), fewer than the records it wrote.
func (w *Writer) Syncs() uint64 { return w.syncs.Load() }

// TruncatedBytes is how many bytes of torn tail this writer has cut off.
func (w *Writer) TruncatedBytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.truncated
}

// Close releases the writer's files. Appends after Close fail with
// ErrClosed. Close does not lower the fence.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.log.Close()
	if lerr := w.lock.Close(); err == nil {
		err = lerr
	}
	return err
}

// ReadFence returns pchannel's fence: the highest term ever opened (0 if
// never opened).
func ReadFence(dir, pchannel string) (int64, error) {
	if err := ValidatePChannel(pchannel); err != nil {
		return 0, err
	}
	return readFence(filepath.Join(dir, pchannel))
}

func readFence(pdir string) (int64, error) {
	path := filepath.Join(pdir, fenceName)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("wal: read fence: %w", err)
	}
	t, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil || t < 0 {
		return 0, &CorruptError{Path: path, Reason: fmt.Sprintf("fence %q is not a term", data)}
	}
	return t, nil
}

// writeFence replaces the fence file atomically and durably. The caller
// holds the exclusive flock.
func writeFence(pdir string, term int64) error {
	tmp := filepath.Join(pdir, fenceName+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("wal: write fence: %w", err)
	}
	_, err = f.WriteString(strconv.FormatInt(term, 10) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(pdir, fenceName))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("wal: write fence: %w", err)
	}
	return syncDir(pdir)
}

// mkdirDurable creates pdir (a child of dir) and makes its entry durable.
func mkdirDurable(dir, pdir string) error {
	if _, err := os.Stat(pdir); err == nil {
		return nil
	}
	if err := os.MkdirAll(pdir, 0o755); err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	if err := syncDir(pdir); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("wal: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("wal: sync dir %s: %w", path, err)
	}
	return nil
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			if err != nil {
				return fmt.Errorf("wal: flock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}
