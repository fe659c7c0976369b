package wal

import (
	"fmt"
	"syscall"

	"github.com/coordd/coordd/durable"
)

// Group commit. Append is Enqueue then Wait. Enqueue puts the record in the
// writer's queue, so the order of Enqueue calls is the order in the log
// (a caller that takes its timestamp and enqueues under one lock gets
// timestamps increasing along the log). Wait makes its caller the leader
// when no one else is writing: the leader takes everything queued (up to
// maxBatchRecords records or maxBatchBytes), checks and encodes each record
// against the log as it will be after the ones before it, writes them with
// one WriteAt and makes them durable with one fdatasync, then answers every
// caller of the batch; once its own record is written it hands the lead to
// the oldest caller still queued. No caller is told
// its record is written before the fdatasync covering it returned.
//
// Per-record outcomes are what Append one at a time would give: a
// duplicate or a timestamp at or below the previous record's fails (or
// dedups) that record only. What fails the write — the fence above the
// writer's term, a write or fdatasync error — fails every record of the
// batch, none of which is then readable; the fence is read once per batch
// under the exclusive flock the batch is written under, exactly as one
// Append did.
const (
	maxBatchRecords = 256
	maxBatchBytes   = 4 << 20
)

// Pending is an enqueued append; Wait returns its outcome.
type Pending struct {
	w        *Writer
	vchannel string
	payload  []byte
	id, ts   uint64   // id: the dedup ID (0: none); its space is the payload's (dedup.go)
	key      dedupKey // the index key when id is non-zero
	dupOf    *Pending // a duplicate of an earlier record of the same batch
	res      AppendResult
	err      error
	done     chan struct{} // closed once res and err are final
	lead     chan struct{} // one send: this caller now leads
}

// Append writes one record for vchannel (which must belong to this
// PChannel) with timestamp ts and returns its ID once it is on disk. It
// fails with ErrFenced when a newer term has been opened (nothing is
// written), with ErrTimestampRegression when ts is not above the log's last
// timestamp, and returns the existing record with Duplicate set when id is
// non-zero and (key space, id, vchannel) is already in the log. The key
// space is the payload's (dedup.go): id is a broadcast ID on any message
// but a DML one, and a writer's dedup ID on a DML message.
func (w *Writer) Append(vchannel string, payload []byte, id, ts uint64) (AppendResult, error) {
	p, err := w.Enqueue(vchannel, payload, id, ts)
	if err != nil {
		return AppendResult{}, err
	}
	return p.Wait()
}

// Enqueue checks the arguments and queues the record behind every record
// enqueued before it; Wait (which every caller must call) returns what
// Append would. payload must not change until Wait returns.
func (w *Writer) Enqueue(vchannel string, payload []byte, id, ts uint64) (*Pending, error) {
	if vchannel == "" || len(vchannel) > MaxVChannelBytes {
		return nil, invalidf("vchannel must be 1..%d bytes, got %d", MaxVChannelBytes, len(vchannel))
	}
	if PChannelOf(vchannel) != w.pchannel {
		return nil, invalidf("vchannel %q does not belong to pchannel %s", vchannel, w.pchannel)
	}
	if len(payload) > MaxPayloadBytes {
		return nil, invalidf("payload is %d bytes (max %d)", len(payload), MaxPayloadBytes)
	}
	p := &Pending{w: w, vchannel: vchannel, payload: payload, id: id, ts: ts,
		done: make(chan struct{}), lead: make(chan struct{}, 1)}
	p.key, _ = keyOf(payload, id, vchannel)
	w.qmu.Lock()
	w.queue = append(w.queue, p)
	w.qmu.Unlock()
	return p, nil
}

// Wait returns the append's outcome once the record is durable (or
// refused). Its caller may lead: write batches until its own record's is
// done, then hand the lead to the oldest record still queued, so no
// caller keeps writing other callers' records for long.
func (p *Pending) Wait() (AppendResult, error) {
	w := p.w
	w.qmu.Lock()
	select {
	case <-p.done:
		w.qmu.Unlock()
		return p.res, p.err
	default:
	}
	if w.leading {
		w.qmu.Unlock()
		select {
		case <-p.done:
			return p.res, p.err
		case <-p.lead: // handed the lead; w.leading stays true
			w.qmu.Lock()
		}
	} else {
		w.leading = true
	}
	for {
		batch := w.takeLocked()
		if len(batch) > 0 {
			w.qmu.Unlock()
			w.commit(batch)
			w.qmu.Lock()
		}
		select {
		case <-p.done:
		default:
			if len(batch) > 0 {
				continue
			}
		}
		if len(w.queue) > 0 {
			w.queue[0].lead <- struct{}{}
		} else {
			w.leading = false
		}
		w.qmu.Unlock()
		<-p.done
		return p.res, p.err
	}
}

// takeLocked removes the next batch from the queue. w.qmu is held.
func (w *Writer) takeLocked() []*Pending {
	limit := w.maxBatch
	if limit <= 0 {
		limit = maxBatchRecords
	}
	n, bytes := 0, 0
	for n < len(w.queue) && n < limit && (n == 0 || bytes+len(w.queue[n].payload) <= maxBatchBytes) {
		bytes += len(w.queue[n].payload)
		n++
	}
	batch := w.queue[:n:n]
	w.queue = w.queue[n:]
	if len(w.queue) == 0 {
		w.queue = nil
	}
	return batch
}

// commit writes one batch and answers each of its callers.
func (w *Writer) commit(batch []*Pending) {
	failAll := func(err error) {
		for _, p := range batch {
			p.err = err
		}
	}
	w.mu.Lock()
	w.commitLocked(batch, failAll)
	w.mu.Unlock()
	for _, p := range batch {
		close(p.done)
	}
}

func (w *Writer) commitLocked(batch []*Pending, failAll func(error)) {
	if w.closed {
		failAll(ErrClosed)
		return
	}
	if w.broken != nil {
		failAll(w.broken)
		return
	}
	if err := flock(w.lock, syscall.LOCK_EX); err != nil {
		failAll(err)
		return
	}
	defer flock(w.lock, syscall.LOCK_UN)
	fence, err := readFence(w.dir)
	if err != nil {
		failAll(err)
		return
	}
	if fence > w.term && !w.noFence {
		failAll(&FencedError{PChannel: w.pchannel, Fence: fence, Term: w.term})
		return
	}
	if err := w.catchUp(); err != nil {
		w.broken = err
		failAll(err)
		return
	}
	if w.st.lastTerm > w.term && !w.noFence {
		failAll(&FencedError{PChannel: w.pchannel, Fence: w.st.lastTerm, Term: w.term})
		return
	}
	// Each record is checked against the log as it will be once the ones
	// before it in the batch are written.
	next, lastTS := w.st.next, w.st.lastTS
	var inBatch map[dedupKey]*Pending
	written := batch[:0:0]
	buf := w.scratch[:0]
	for _, p := range batch {
		if p.id != 0 {
			k := p.key
			if v, ok := w.index[k]; ok {
				p.res = AppendResult{ID: v.id, Timestamp: v.ts, Duplicate: true}
				continue
			}
			if first, ok := inBatch[k]; ok {
				p.dupOf = first
				continue
			}
		}
		if p.ts <= lastTS {
			p.err = &TimestampError{PChannel: w.pchannel, Last: lastTS, Got: p.ts}
			continue
		}
		rec := Record{ID: MessageID{Term: w.term, Offset: next}, Timestamp: p.ts, VChannel: p.vchannel, Payload: p.payload}
		rec.setDedupID(p.id)
		buf = encodeRecord(buf, &rec)
		p.res = AppendResult{ID: rec.ID, Timestamp: p.ts}
		if p.id != 0 {
			if inBatch == nil {
				inBatch = map[dedupKey]*Pending{}
			}
			inBatch[p.key] = p
		}
		written = append(written, p)
		next, lastTS = next+1, p.ts
	}
	// The encoding buffer is kept for the next batch unless it grew huge.
	if cap(buf) <= maxScratch {
		w.scratch = buf
	} else {
		w.scratch = nil
	}
	fail := func(err error) {
		for _, p := range written {
			p.res, p.err = AppendResult{}, err
		}
		for _, p := range batch {
			if p.dupOf != nil {
				p.err = err
			}
		}
	}
	if len(written) > 0 {
		if _, err := w.log.WriteAt(buf, w.st.pos); err != nil {
			// Take back whatever part was written; if even that fails the
			// file is in doubt.
			if terr := w.log.Truncate(w.st.pos); terr != nil {
				w.broken = fmt.Errorf("wal: write failed (%v) and truncating it failed: %w", err, terr)
			}
			fail(fmt.Errorf("wal: write: %w", err))
			return
		}
		if w.beforeSync != nil {
			w.beforeSync()
		}
		w.syncs.Add(1)
		if err := durable.Fdatasync(w.log); err != nil {
			// After a failed fsync the page cache may claim data the disk lost.
			w.broken = fmt.Errorf("wal: fdatasync failed, writer unusable: %w", err)
			fail(w.broken)
			return
		}
	}
	w.st.pos += int64(len(buf))
	w.st.next, w.st.lastTS = next, lastTS
	if len(written) > 0 {
		w.st.lastTerm = w.term
	}
	for _, p := range written {
		if p.id != 0 {
			w.index[p.key] = dedupVal{p.res.ID, p.res.Timestamp}
		}
	}
	for _, p := range batch {
		if p.dupOf != nil {
			p.res = AppendResult{ID: p.dupOf.res.ID, Timestamp: p.dupOf.res.Timestamp, Duplicate: true}
		}
	}
}
