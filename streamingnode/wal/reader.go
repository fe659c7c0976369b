package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultPollInterval is how often a following Reader looks for new records.
const DefaultPollInterval = 5 * time.Millisecond

// readChunk bounds how many bytes of records one refill takes in.
const readChunk = 1 << 20

// ReaderOptions select what a Reader returns.
type ReaderOptions struct {
	// VChannel: only records of this vchannel (or CChannel); "" = all.
	VChannel string
	// From: the first offset to return.
	From uint64
	// Follow: at the end of the log wait for new records (until the context
	// ends) instead of returning io.EOF.
	Follow bool
	// PollInterval: how often a following reader checks for new records
	// (default DefaultPollInterval).
	PollInterval time.Duration
}

// Reader iterates one PChannel's records in offset order. It reads the
// shared directory directly, so it works in any process, whether or not that
// process holds a Writer. Records are read under a shared flock, so a reader
// never sees a record that is still being written. Not safe for concurrent
// use.
type Reader struct {
	pchannel string
	pdir     string
	logPath  string
	opts     ReaderOptions

	lock    *os.File
	log     *os.File
	st      scanPos
	pending []Record
	err     error // sticky: corruption found after the pending records
	closed  bool
}

// NewReader prepares a reader of pchannel's log under dir. The log need
// not exist yet.
func NewReader(dir, pchannel string, opts ReaderOptions) (*Reader, error) {
	if err := ValidatePChannel(pchannel); err != nil {
		return nil, err
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	pdir := filepath.Join(dir, pchannel)
	return &Reader{pchannel: pchannel, pdir: pdir, logPath: filepath.Join(pdir, logName), opts: opts}, nil
}

// Next returns the next matching record. At the end of the log it returns
// io.EOF, or, when following, waits for more until ctx ends (then it
// returns ctx.Err()). Corruption is reported as ErrCorrupt.
func (r *Reader) Next(ctx context.Context) (Record, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if r.closed {
			return Record{}, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return Record{}, err
		}
		if len(r.pending) > 0 {
			rec := r.pending[0]
			r.pending[0] = Record{}
			r.pending = r.pending[1:]
			return rec, nil
		}
		if r.err != nil {
			return Record{}, r.err
		}
		progressed, err := r.fill()
		if err != nil {
			// Hand out the good records before the error.
			r.err = err
			continue
		}
		if progressed {
			continue
		}
		if !r.opts.Follow {
			return Record{}, io.EOF
		}
		if timer == nil {
			timer = time.NewTimer(r.opts.PollInterval)
		} else {
			timer.Reset(r.opts.PollInterval)
		}
		select {
		case <-ctx.Done():
			return Record{}, ctx.Err()
		case <-timer.C:
		}
	}
}

// fill scans the records appended since the last fill into r.pending.
func (r *Reader) fill() (progressed bool, err error) {
	if r.log == nil {
		lock, err := os.Open(filepath.Join(r.pdir, lockName))
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("wal: %w", err)
		}
		log, err := os.Open(r.logPath)
		if err != nil {
			lock.Close()
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return false, fmt.Errorf("wal: %w", err)
		}
		r.lock, r.log = lock, log
	}
	fi, err := r.log.Stat()
	if err != nil {
		return false, fmt.Errorf("wal: %w", err)
	}
	if fi.Size() == r.st.pos {
		return false, nil
	}
	if err := flock(r.lock, syscall.LOCK_SH); err != nil {
		return false, err
	}
	defer flock(r.lock, syscall.LOCK_UN)
	if fi, err = r.log.Stat(); err != nil {
		return false, fmt.Errorf("wal: %w", err)
	}
	size := fi.Size()
	if size < r.st.pos {
		return false, &CorruptError{Path: r.logPath, Pos: size, Reason: fmt.Sprintf("log shrank below %d bytes", r.st.pos)}
	}
	before := r.st.pos
	// A torn tail is left for the next writer to truncate; until then the
	// reader is simply at the end.
	_, err = scan(r.log, r.logPath, size, &r.st, readChunk, func(rec *Record) {
		if rec.ID.Offset >= r.opts.From && (r.opts.VChannel == "" || rec.VChannel == r.opts.VChannel) {
			r.pending = append(r.pending, *rec)
		}
	})
	return r.st.pos != before, err
}

// Close releases the reader's files.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	var err error
	if r.log != nil {
		err = r.log.Close()
		if lerr := r.lock.Close(); err == nil {
			err = lerr
		}
	}
	return err
}

// ReadAll returns every record of vchannel ("" = all) from offset from to
// the current end of pchannel's log.
func ReadAll(dir, pchannel, vchannel string, from uint64) ([]Record, error) {
	r, err := NewReader(dir, pchannel, ReaderOptions{VChannel: vchannel, From: from})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []Record
	for {
		rec, err := r.Next(context.Background())
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, rec)
	}
}
