package datadir

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Hooks for tests of other packages (raftnode's cluster tests): nothing in
// the product calls them.

// FailStableWritesForTest puts a switch under the member's term and vote
// writes to raft.db: while it holds an error, every such write fails with
// it (nil lifts it). Call it before Open: raft must see the switch from
// its first write on.
func (s *Storage) FailStableWritesForTest() func(error) {
	f := &switchedStable{StableStore: s.stable.StableStore}
	s.stable.StableStore = f
	return f.set
}

// switchedStable is a StableStore whose writes fail while err is set.
type switchedStable struct {
	raft.StableStore
	err atomic.Pointer[error]
}

func (f *switchedStable) set(err error) {
	if err == nil {
		f.err.Store(nil)
		return
	}
	f.err.Store(&err)
}

func (f *switchedStable) failure() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (f *switchedStable) Set(k, v []byte) error {
	if err := f.failure(); err != nil {
		return err
	}
	return f.StableStore.Set(k, v)
}

func (f *switchedStable) SetUint64(k []byte, v uint64) error {
	if err := f.failure(); err != nil {
		return err
	}
	return f.StableStore.SetUint64(k, v)
}
