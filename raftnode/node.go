package raftnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode/datadir"
)

// Node is one coordd raft member.
type Node struct {
	cfg    Config
	logger hclog.Logger
	raft   *raft.Raft
	fsm    *fsmAdapter
	// logStore is where the entries live (raft.db or the raft-wal log),
	// behind the writer of datadir.LogReachFile.
	logStore raft.LogStore
	snaps    *datadir.SnapshotCache
	configs  configCache // Configuration's last answer
	trans    raft.Transport
	// tcp is the TCP transport when the node made one (nil for a
	// Config.Transport): Shutdown closes its pooled outbound connections.
	tcp     *raft.NetworkTransport
	watch   *commitWatch
	logs    *watchedLogStore
	storage *datadir.Storage

	proposer *batcher
	leader   *leadership
	verify   verifier
	lease    *leaderLease

	proposeObserver func(time.Duration)
	// gauge is the memory guard (state_budget.go).
	gauge *stateGauge

	closeOnce sync.Once
	closed    chan struct{}
	// establishedTerm is the term in which this node, as leader, committed
	// LeaderEstablished; 0 when it is not an established leader.
	establishedTerm atomic.Uint64
}

// Open creates or reopens a member's durable state and starts raft. It does
// not bootstrap: see Bootstrap and package cluster.
func Open(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if cfg.ID == "" || cfg.DataDir == "" || cfg.RaftAddr == "" {
		return nil, errors.New("raftnode: ID, DataDir and RaftAddr are required")
	}
	if cfg.Storage != nil && cfg.Storage.Identity().MemberID != cfg.ID {
		return nil, errors.New("raftnode: Config.Storage was opened for another member ID")
	}
	st := cfg.Storage
	if st == nil {
		var err error
		if st, err = OpenStorage(cfg); err != nil {
			return nil, err
		}
	}
	n := &Node{cfg: cfg, logger: cfg.Logger, closed: make(chan struct{})}
	n.fsm = newFSMAdapter(cfg.Logger.Named("fsm"))
	n.gauge = newStateGauge(cfg.StateBudget, cfg.StateMeasureInterval, cfg.StateClock, n.fsm.State)
	n.snaps, n.storage = st.Snapshots(), st
	n.logStore = st.Logs()
	n.logs = &watchedLogStore{LogStore: &retainingLogStore{LogStore: n.logStore, snaps: n.snaps}}
	st.SetStableLogger(cfg.Logger.Named("stable"))

	var err error
	trans := cfg.Transport
	if trans == nil {
		if n.tcp, err = newTCPTransport(cfg, st); err != nil {
			st.Close()
			return nil, err
		}
		trans = n.tcp
	}
	n.trans, n.watch = watchCommits(trans, cfg.Logger.Named("transport"), cfg.FaultInjection)
	n.watch.termAt = n.termAt
	notify := make(chan bool, 16)
	rc, err := cfg.raftConfig(notify)
	if err != nil {
		n.closeStores()
		return nil, err
	}
	n.lease = newLeaderLease(cfg.LeaderLease)
	if n.lease.enabled() {
		// A lease this member upheld before it restarted must run out
		// before it can vote again: it no longer remembers its leader.
		cfg.Logger.Info("waiting out any leader lease of an earlier run before starting raft", "lease", cfg.LeaderLease)
		time.Sleep(cfg.LeaderLease)
	}
	err = datadir.Guard(cfg.DataDir, "starting raft on it", func() error {
		var rerr error
		n.raft, rerr = raft.NewRaft(rc, n.fsm, n.logs, st.Stable(), n.snaps, n.trans)
		return rerr
	})
	if err != nil {
		n.closeStores()
		var de *datadir.DamagedError
		if errors.As(err, &de) {
			return nil, err
		}
		return nil, fmt.Errorf("start raft: %w", err)
	}
	n.watch.setRaft(n.raft)
	if snaps, err := n.snaps.List(); err == nil && len(snaps) > 0 {
		n.fsm.advance(snaps[0].Index)
	}
	n.verify.n = n
	n.proposer = newBatcher(n, cfg.MaxInflightEntries, cfg.MaxPendingProposals)
	n.leader = newLeadership(n, notify)
	return n, nil
}

// HasExistingState reports whether the member already has raft state on
// disk (and so must not bootstrap again).
func (n *Node) HasExistingState() (bool, error) {
	return raft.HasExistingState(n.logStore, n.storage.BoltStable(), n.snaps)
}

// Bootstrap forms a new cluster from a static peer list. Every member may
// call it with the same list; a member with existing state must not.
func (n *Node) Bootstrap(peers []Peer) error {
	cfg := raft.Configuration{}
	for _, p := range peers {
		cfg.Servers = append(cfg.Servers, raft.Server{
			Suffrage: raft.Voter, ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
	}
	if err := n.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap cluster: %w", err)
	}
	return nil
}

// Peer is a member of a static bootstrap list.
type Peer struct {
	ID       string
	RaftAddr string
}

// ID is this member's ID.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr is this member's raft address.
func (n *Node) RaftAddr() string { return n.cfg.RaftAddr }

// State returns the latest applied state (a stale read by definition).
func (n *Node) State() *fsm.State { return n.fsm.State() }

// StateChanged returns a channel that is closed when a newer state than the
// current one is published. Take it before reading State so no change is
// missed.
func (n *Node) StateChanged() <-chan struct{} { return n.fsm.changedCh() }

// SetApplyObserver installs a hook called after every applied command entry.
// Call it before the node serves traffic.
func (n *Node) SetApplyObserver(o ApplyObserver) { n.fsm.observer = o }

// ProposalQueue reports the proposal queue's bound, depth and refusals.
func (n *Node) ProposalQueue() QueueStats {
	s := n.proposer.q.stats()
	s.Inflight = int(n.proposer.inflight.Load())
	s.MaxInflight = cap(n.proposer.slots)
	return s
}

// SetProposeObserver installs a hook told how long each successful
// proposal took (commit and apply). Call it before the node serves traffic.
func (n *Node) SetProposeObserver(o func(time.Duration)) { n.proposeObserver = o }

// Raft exposes the underlying raft instance for status and tests.
func (n *Node) Raft() *raft.Raft { return n.raft }

// IsLeader reports whether this node is the raft leader right now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// EstablishedTerm is the term in which this node established itself as
// leader, or 0 if it is not an established leader.
func (n *Node) EstablishedTerm() uint64 { return n.establishedTerm.Load() }

// Leader returns the current leader's ID and raft address, if known.
func (n *Node) Leader() (id, raftAddr string) {
	addr, lid := n.raft.LeaderWithID()
	return string(lid), string(addr)
}

// notLeader builds the error returned by leader-only operations.
func (n *Node) notLeader() error {
	id, addr := n.Leader()
	return &NotLeaderError{LeaderID: id, LeaderAddr: addr}
}

// Snapshot forces a raft snapshot now (tests and operators).
func (n *Node) Snapshot() error {
	if err := n.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// LastSnapshotIndex is the index of the newest snapshot on disk (0: none).
// Unlike LastSnapshot it reads no file: Status asks on every call.
func (n *Node) LastSnapshotIndex() uint64 {
	index, _, _ := n.snaps.NewestIndex()
	return index
}

// LastSnapshot returns the index and time of the newest snapshot on disk.
func (n *Node) LastSnapshot() (index uint64, at time.Time, ok bool) {
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return 0, time.Time{}, false
	}
	m := metas[0]
	fi, err := os.Stat(filepath.Join(n.cfg.DataDir, "snapshots", m.ID))
	if err == nil {
		at = fi.ModTime()
	}
	return m.Index, at, true
}

// Done is closed when the node has shut down.
func (n *Node) Done() <-chan struct{} { return n.closed }

// shutdownSettleTimeout bounds how long Shutdown waits for the entries
// already with raft to be answered (batcher.settle).
const shutdownSettleTimeout = 5 * time.Second

// Shutdown stops leader routines, lets the entries already with raft be
// answered, then stops raft and the stores. Safe to call twice.
func (n *Node) Shutdown() error {
	var err error
	n.closeOnce.Do(func() {
		close(n.closed)
		n.leader.stop()
		n.proposer.stop()
		// A lost quorum ends the leadership (and with it every entry in
		// flight) within the lease timeout; the bound is for a raft that
		// is stuck for another reason.
		n.proposer.settle(n.settleTimeout())
		// A term or vote write still waiting for space ends here
		// (datadir/stable_wait.go), or raft.Shutdown would wait for it forever.
		n.storage.StopStableWaits()
		if e := n.raft.Shutdown().Error(); e != nil {
			err = fmt.Errorf("raft shutdown: %w", e)
		}
		n.closeStores()
	})
	return err
}

func (n *Node) closeStores() {
	// Closing the listener leaves the pooled outbound connections open, and
	// with them a reader goroutine on each peer; close them too, so a member
	// shut down in-process leaves nothing behind on the others.
	if n.tcp != nil {
		n.tcp.CloseStreams()
	}
	if c, ok := n.trans.(io.Closer); ok {
		c.Close()
	}
	n.storage.Close()
}

// WaitForLeader blocks until some leader is known or ctx ends.
func (n *Node) WaitForLeader(ctx context.Context) (string, error) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		if id, _ := n.Leader(); id != "" {
			return id, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("wait for leader: %w", ctx.Err())
		case <-n.closed:
			return "", ErrShuttingDown
		case <-t.C:
		}
	}
}
