package main

import (
	"slices"
	"sync"

	"github.com/coordd/coordd/api/coordpb"
)

// ackLog records one broadcast task's acks in etcd. Every save writes the
// whole task record with every ack recorded so far, so a save that
// carries an ack also carries every earlier one.
//
// Batched (the newest Milvus broadcaster): acks that arrive while a save is
// in flight wait for it and are then saved together by the next one, so a
// task of n targets takes between 1 and n ack transactions, depending on
// how the acks arrive. Per ack (batch false, the older broadcaster): each
// ack is its own transaction, one after the other.
//
// In both modes ack returns once a save that includes the ack committed
// (or with the error of the save that should have carried it): when every
// target's ack returned nil, every ack is in etcd. After a failed save
// every later ack fails too (the task is abandoned, as Broadcast does).
type ackLog struct {
	batch bool
	// save persists the task with these acks (a copy, the caller's to
	// keep); it is called by one goroutine at a time.
	save func(acked []*coordpb.Checkpoint) error

	mu     sync.Mutex
	cond   *sync.Cond
	acked  []*coordpb.Checkpoint // every ack so far, in arrival order
	saved  int                   // acked[:saved] are in etcd
	saving bool
	err    error // the first failed save's
	txns   int   // saves made (for tests and reports)
}

func newAckLog(batch bool, save func([]*coordpb.Checkpoint) error) *ackLog {
	l := &ackLog{batch: batch, save: save}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *ackLog) ack(cp *coordpb.Checkpoint) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.acked = append(l.acked, cp)
	if !l.batch { // the lock is held over the save: one ack per transaction
		l.txns++
		if err := l.save(slices.Clone(l.acked)); err != nil {
			l.err = err
			return err
		}
		l.saved = len(l.acked)
		return nil
	}
	mine := len(l.acked) // saved once l.saved reaches it
	for l.saved < mine && l.err == nil {
		if l.saving {
			l.cond.Wait()
			continue
		}
		// This goroutine saves every ack collected so far, its own and
		// those that arrived during the previous save.
		l.saving = true
		batch, through := slices.Clone(l.acked), len(l.acked)
		l.txns++
		l.mu.Unlock()
		err := l.save(batch)
		l.mu.Lock()
		l.saving = false
		if err != nil {
			l.err = err
		} else {
			l.saved = through
		}
		l.cond.Broadcast()
	}
	if l.saved >= mine {
		return nil
	}
	return l.err
}

// all is every ack recorded, in arrival order.
func (l *ackLog) all() []*coordpb.Checkpoint {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

// saves is how many ack saves were made.
func (l *ackLog) saves() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.txns
}
