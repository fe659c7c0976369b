package raftnode

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// applyResponse is what ApplyBatch hands back to the proposer of one entry.
type applyResponse struct {
	results []*logpb.Result
}

// fsmAdapter connects raft's FSM interface to the pure fsm.State. Only raft's
// FSM goroutine writes; everyone else reads the published state.
type fsmAdapter struct {
	logger hclog.Logger
	state  atomic.Pointer[fsm.State]
	// delivered is the highest raft index handed to this adapter (commands
	// and configuration entries); linearizable reads wait on it.
	delivered atomic.Uint64

	mu      sync.Mutex
	waiters map[chan struct{}]uint64 // closed once delivered >= value
	changed chan struct{}            // closed when the next state is published

	observer ApplyObserver
}

// ApplyObserver is told about every applied entry (metrics, watchers). It
// runs on raft's FSM goroutine and must not block.
type ApplyObserver func(index uint64, commands int)

var _ raft.BatchingFSM = (*fsmAdapter)(nil)

func newFSMAdapter(logger hclog.Logger) *fsmAdapter {
	a := &fsmAdapter{logger: logger, waiters: make(map[chan struct{}]uint64), changed: make(chan struct{})}
	a.state.Store(fsm.New())
	return a
}

// State returns the current published state.
func (a *fsmAdapter) State() *fsm.State { return a.state.Load() }

func (a *fsmAdapter) Apply(l *raft.Log) interface{} {
	return a.ApplyBatch([]*raft.Log{l})[0]
}

func (a *fsmAdapter) ApplyBatch(logs []*raft.Log) []interface{} {
	out := make([]interface{}, len(logs))
	st := a.state.Load()
	var last uint64
	for i, l := range logs {
		last = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		next, results, err := st.Apply(l.Index, l.Data)
		if err != nil {
			// A committed entry this replica cannot apply: continuing would
			// diverge from the replicas that can. Stop loudly.
			a.logger.Error("fatal: cannot apply committed entry", "index", l.Index, "error", err)
			panic(fmt.Sprintf("coordd: cannot apply committed entry %d: %v", l.Index, err))
		}
		st = next
		out[i] = applyResponse{results: results}
		if a.observer != nil {
			a.observer(l.Index, len(results))
		}
	}
	a.publish(st)
	if last > 0 {
		a.advance(last)
	}
	return out
}

// publish stores a new state and wakes everyone waiting for a change.
func (a *fsmAdapter) publish(st *fsm.State) {
	a.state.Store(st)
	a.mu.Lock()
	close(a.changed)
	a.changed = make(chan struct{})
	a.mu.Unlock()
}

// changedCh returns a channel closed when the state after the current one
// is published. Take it before reading the state to never miss a change.
func (a *fsmAdapter) changedCh() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// advance records delivery up to index and wakes read waiters.
func (a *fsmAdapter) advance(index uint64) {
	for {
		cur := a.delivered.Load()
		if index <= cur {
			return
		}
		if a.delivered.CompareAndSwap(cur, index) {
			break
		}
	}
	a.mu.Lock()
	for ch, want := range a.waiters {
		if index >= want {
			close(ch)
			delete(a.waiters, ch)
		}
	}
	a.mu.Unlock()
}

// waitCh returns a channel closed once delivered >= index.
func (a *fsmAdapter) waitCh(index uint64) (ch chan struct{}, cancel func()) {
	ch = make(chan struct{})
	a.mu.Lock()
	if a.delivered.Load() >= index {
		a.mu.Unlock()
		close(ch)
		return ch, func() {}
	}
	a.waiters[ch] = index
	a.mu.Unlock()
	return ch, func() {
		a.mu.Lock()
		delete(a.waiters, ch)
		a.mu.Unlock()
	}
}

// Snapshot captures the current state: a pointer copy, so Apply is never
// stalled by a snapshot however large the state is.
func (a *fsmAdapter) Snapshot() (raft.FSMSnapshot, error) {
	return &fsmSnapshot{state: a.state.Load()}, nil
}

// Restore builds a fresh state from the snapshot and swaps it in only once
// it is complete and valid.
func (a *fsmAdapter) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := fsm.ReadSnapshot(rc)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	a.publish(st)
	a.advance(st.AppliedIndex())
	return nil
}

type fsmSnapshot struct{ state *fsm.State }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.state.WriteSnapshot(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
