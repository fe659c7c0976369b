package raftnode

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// commitWatch sits between raft and its transport and learns, from the RPCs
// this member receives, a lower bound of the cluster's commit index. A
// follower's own commit index cannot run ahead of its own log, so a member
// that stores nothing (a full disk, a snapshot install that does not
// finish) looks current by its own numbers while the leader moves on; this
// is what tells readiness how far behind it really is.
//
// Every value it records is committed: an AppendEntries request carries its
// sender's commit index, and an InstallSnapshot request a snapshot, which
// only holds committed entries. Both hold whichever leader sent them, even
// a deposed one, so the maximum over all of them is a safe lower bound.
// Heartbeats carry no commit index and may bypass the consumer channel (the
// TCP transport's fast path); they are not needed here.
//
// The same wrapper checks leadership transfers (transfer_guard.go) and
// snapshots sent to this member (stale_snapshot.go) and, with fault
// injection, delays RPCs (raft_delay.go).
type commitWatch struct {
	raft.Transport
	logger hclog.Logger
	out    chan raft.RPC
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	heard  atomic.Uint64

	view               atomic.Pointer[raftView]
	transferTerm       atomic.Uint64 // the term of the last transfer this member started
	awaitTerm          atomic.Uint64 // an accepted TimeoutNow's term, until raft's election starts
	electionStarted    chan struct{}
	gate               sync.RWMutex // heartbeats read-lock it; an accepted TimeoutNow holds it
	refusedTimeoutNows atomic.Uint64
	refusedSnapshots   atomic.Uint64 // stale_snapshot.go
	// termAt is the term of this member's entry at an index, from its log
	// or its newest snapshot (ok false: it holds none there); set before
	// raft starts (stale_snapshot.go).
	termAt func(index uint64) (term uint64, ok bool)
	faults *faultDelays // nil: fault injection off
	// received is, with faults, the last snapshot received
	// (snapshot_replay.go).
	received receivedSnapshot
}

// commitWatchPreVote is a commitWatch over a transport that supports
// pre-vote; raft turns pre-vote off for a transport that does not say so.
type commitWatchPreVote struct {
	*commitWatch
	pv raft.WithPreVote
}

func (w commitWatchPreVote) RequestPreVote(id raft.ServerID, target raft.ServerAddress,
	args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return w.pv.RequestPreVote(id, target, args, resp)
}

// watchCommits wraps t and starts forwarding its RPCs to raft. Close stops
// the forwarding and closes t. faults enables SetRaftDelay.
func watchCommits(t raft.Transport, logger hclog.Logger, faults bool) (raft.Transport, *commitWatch) {
	w := &commitWatch{Transport: t, logger: logger, out: make(chan raft.RPC), stop: make(chan struct{}),
		done: make(chan struct{}), electionStarted: make(chan struct{}, 1)}
	if faults {
		w.faults = newFaultDelays()
	}
	go w.run()
	if pv, ok := t.(raft.WithPreVote); ok {
		return commitWatchPreVote{commitWatch: w, pv: pv}, w
	}
	return w, w
}

// Consumer is the channel raft reads RPCs from.
func (w *commitWatch) Consumer() <-chan raft.RPC { return w.out }

func (w *commitWatch) run() {
	defer close(w.done)
	in := w.Transport.Consumer()
	for {
		select {
		case rpc := <-in:
			w.observe(rpc)
			if kind := rpcKind(rpc); w.faults.delays(kind) {
				w.hold(rpc, kind)
				continue
			}
			if !w.deliver(rpc) {
				return
			}
		case <-w.stop:
			return
		}
	}
}

// deliver hands rpc to raft (a TimeoutNow only if it passes the transfer
// check, a snapshot with the check of its index); false means the wrapper
// is stopping.
func (w *commitWatch) deliver(rpc raft.RPC) bool {
	if req, ok := rpc.Command.(*raft.TimeoutNowRequest); ok {
		return w.deliverTimeoutNow(rpc, req)
	}
	if w.faults != nil {
		w.received.capture(&rpc)
	}
	w.guardSnapshot(&rpc)
	select {
	case w.out <- rpc:
		return true
	case <-w.stop:
		return false
	}
}

func (w *commitWatch) observe(rpc raft.RPC) {
	var idx uint64
	switch c := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		idx = c.LeaderCommitIndex
	case *raft.InstallSnapshotRequest:
		idx = c.LastLogIndex
	}
	for {
		cur := w.heard.Load()
		if idx <= cur || w.heard.CompareAndSwap(cur, idx) {
			return
		}
	}
}

// Close stops forwarding and closes the wrapped transport. Raft closes its
// transport on shutdown and Node closes it again, so it is idempotent.
func (w *commitWatch) Close() error {
	var err error
	w.once.Do(func() {
		close(w.stop)
		<-w.done
		if w.faults != nil {
			w.faults.held.Wait()
		}
		if c, ok := w.Transport.(io.Closer); ok {
			err = c.Close()
		}
	})
	return err
}

// LeaderCommitIndex is the highest commit index this member has heard of
// from a leader since it started (0: none yet). The cluster has committed at
// least this much; the member itself may not have stored it.
func (n *Node) LeaderCommitIndex() uint64 { return n.watch.heard.Load() }
