package raftnode

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Fault injection (Config.FaultInjection, off by default): the transport
// wrapper can hold every raft RPC of one kind that this member receives for
// a while before raft sees it, as a slow or retransmitting network would.
// The Jepsen-style suite uses it to hold a leadership transfer's TimeoutNow
// past a term change, the schedule the transfer check exists for. A held
// RPC is re-timed whenever the delays change: setting a kind's delay to 0
// releases every RPC of that kind at once.

// RPC kinds a delay can be set for.
const (
	RPCAppendEntries  = "append_entries" // with entries or a commit index
	RPCHeartbeat      = "heartbeat"      // an empty AppendEntries (raft's fast path)
	RPCRequestVote    = "request_vote"
	RPCRequestPreVote = "request_pre_vote"
	RPCInstallSnap    = "install_snapshot"
	RPCTimeoutNow     = "timeout_now"
	// RPCHeartbeatAnswer holds the answers to the heartbeats this member
	// sends, after the follower processed them (a slow return path).
	RPCHeartbeatAnswer = "heartbeat_answer"
)

// rpcKinds lists the kinds SetRaftDelay accepts (read only).
var rpcKinds = []string{RPCAppendEntries, RPCHeartbeat, RPCRequestVote, RPCRequestPreVote, RPCInstallSnap, RPCTimeoutNow, RPCHeartbeatAnswer}

// RPCKinds returns the kinds SetRaftDelay accepts.
func RPCKinds() []string { return slices.Clone(rpcKinds) }

// MaxRaftDelay bounds one delay.
const MaxRaftDelay = 5 * time.Minute

// ErrFaultInjectionOff is returned by SetRaftDelay on a member started
// without Config.FaultInjection.
var ErrFaultInjectionOff = errors.New("fault injection is off on this member (start it with --fault-injection)")

// rpcKind names a received RPC's kind.
func rpcKind(rpc raft.RPC) string {
	switch c := rpc.Command.(type) {
	case *raft.AppendEntriesRequest:
		if len(c.Entries) == 0 && c.LeaderCommitIndex == 0 && c.PrevLogEntry == 0 {
			return RPCHeartbeat
		}
		return RPCAppendEntries
	case *raft.RequestVoteRequest:
		return RPCRequestVote
	case *raft.RequestPreVoteRequest:
		return RPCRequestPreVote
	case *raft.InstallSnapshotRequest:
		return RPCInstallSnap
	case *raft.TimeoutNowRequest:
		return RPCTimeoutNow
	}
	return ""
}

// faultDelays holds the delays; a nil *faultDelays (fault injection off)
// delays nothing.
type faultDelays struct {
	mu      sync.Mutex
	delay   map[string]time.Duration
	changed chan struct{} // closed and replaced on every change
	held    sync.WaitGroup
	holding atomic.Int64 // RPCs (or answers) held right now
}

func newFaultDelays() *faultDelays {
	return &faultDelays{delay: map[string]time.Duration{}, changed: make(chan struct{})}
}

func (f *faultDelays) get(kind string) (time.Duration, <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.delay[kind], f.changed
}

func (f *faultDelays) set(kind string, d time.Duration) error {
	if f == nil {
		return ErrFaultInjectionOff
	}
	if !slices.Contains(rpcKinds, kind) {
		return fmt.Errorf("unknown raft RPC kind %q (want one of %v)", kind, rpcKinds)
	}
	if d < 0 || d > MaxRaftDelay {
		return fmt.Errorf("raft delay %v out of range [0, %v]", d, MaxRaftDelay)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d == 0 {
		delete(f.delay, kind)
	} else {
		f.delay[kind] = d
	}
	close(f.changed)
	f.changed = make(chan struct{})
	return nil
}

func (f *faultDelays) snapshot() map[string]time.Duration {
	out := map[string]time.Duration{}
	if f == nil {
		return out
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, d := range f.delay {
		out[k] = d
	}
	return out
}

// wait blocks until an RPC of kind that arrived at since is due; false
// means stop was closed first.
func (f *faultDelays) wait(kind string, since time.Time, stop <-chan struct{}) bool {
	f.holding.Add(1)
	defer f.holding.Add(-1)
	for {
		d, changed := f.get(kind)
		left := time.Until(since.Add(d))
		if left <= 0 {
			return true
		}
		t := time.NewTimer(left)
		select {
		case <-t.C:
		case <-changed:
		case <-stop:
			t.Stop()
			return false
		}
		t.Stop()
	}
}

// delays reports whether an RPC of kind must be held now.
func (f *faultDelays) delays(kind string) bool {
	if f == nil || kind == "" {
		return false
	}
	d, _ := f.get(kind)
	return d > 0
}

// holdHeartbeat delays a heartbeat on raft's fast path (on the connection's
// own goroutine, so later RPCs on that connection wait too).
func (f *faultDelays) holdHeartbeat(stop <-chan struct{}) {
	if f.delays(RPCHeartbeat) {
		f.wait(RPCHeartbeat, time.Now(), stop)
	}
}

// AppendEntries sends as raft asks; with fault injection, the answer to a
// heartbeat is held before raft sees it.
func (w *commitWatch) AppendEntries(id raft.ServerID, target raft.ServerAddress,
	args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := w.Transport.AppendEntries(id, target, args, resp)
	if w.faults.delays(RPCHeartbeatAnswer) && len(args.Entries) == 0 && args.LeaderCommitIndex == 0 && args.PrevLogEntry == 0 {
		w.faults.wait(RPCHeartbeatAnswer, time.Now(), w.stop)
	}
	return err
}

// hold delivers rpc once its delay has passed, beside the forwarding loop.
func (w *commitWatch) hold(rpc raft.RPC, kind string) {
	w.faults.held.Add(1)
	go func() {
		defer w.faults.held.Done()
		if w.faults.wait(kind, time.Now(), w.stop) {
			w.deliver(rpc)
		}
	}()
}

// SetRaftDelay holds every raft RPC of kind (RPCTimeoutNow, ...) this
// member receives for d before raft sees it; 0 delivers them at once again,
// including those held now. It fails unless Config.FaultInjection is set.
func (n *Node) SetRaftDelay(kind string, d time.Duration) error {
	if err := n.watch.faults.set(kind, d); err != nil {
		return err
	}
	n.logger.Warn("fault injection: raft RPC delay set", "kind", kind, "delay", d)
	return nil
}

// RaftDelays reports the delays in force (empty when fault injection is
// off or nothing is delayed).
func (n *Node) RaftDelays() map[string]time.Duration { return n.watch.faults.snapshot() }

// FaultInjection reports whether this member accepts SetRaftDelay.
func (n *Node) FaultInjection() bool { return n.watch.faults != nil }
