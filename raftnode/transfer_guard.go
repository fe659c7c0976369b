package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// A leadership transfer ends with the leader sending its target a
// TimeoutNow; the target then runs an election that every voter grants even
// while it knows a leader (hashicorp/raft's LeadershipTransfer flag). raft's
// TimeoutNow names no term, so a TimeoutNow delivered late (held in a socket
// buffer while the target stalls, retransmitted after a partition heals)
// would elect its target in whatever term it arrives, inside another
// leader's lease (docs/architecture.md#leader-lease).
//
// coordd binds each TimeoutNow to the term whose lease its sender ended:
//
//   - the sender: Node.TransferLeadership ends the lease of term T and
//     records T; the transport wrapper stamps T into the request's header
//     (after the member ID, behind a NUL, which no member ID contains). A
//     TimeoutNow without a recorded transfer is not sent at all.
//   - the receiver: the wrapper hands raft a TimeoutNow only if its stamp
//     is this member's current term and its sender is the leader this
//     member follows in that term. Anything else is answered with an
//     error, which fails the sender's transfer.
//
// The check and raft's use of the request must see the same term. All RPCs
// but heartbeats reach raft in order through the wrapper, so only a
// heartbeat (raft's fast path, run beside raft's main loop) could move the
// term in between. The wrapper therefore holds heartbeats from the check
// until raft has started the transfer election (its RequestVote of term
// T+1 leaves through the wrapper) or transferGateBound has passed.
//
// The stamp travels inside raft's own header, so a member running an older
// coordd ignores it (its raft ignores the header of a TimeoutNow), while an
// upgraded member refuses an unstamped TimeoutNow from an older leader: that
// transfer fails, and a restart of the old leader is an ordinary election.

// transferStampSep separates the member ID from the stamped term.
const transferStampSep = "\x00coordd-transfer-term="

// transferGateBound is how long heartbeats are held at most while an
// accepted TimeoutNow turns into an election.
const transferGateBound = time.Second

func stampTransfer(id []byte, term uint64) []byte {
	out := append([]byte(nil), id...)
	out = append(out, transferStampSep...)
	return strconv.AppendUint(out, term, 10)
}

// parseTransferStamp splits a stamped header ID; ok is false when id
// carries no valid stamp.
func parseTransferStamp(id []byte) (member []byte, term uint64, ok bool) {
	i := bytes.Index(id, []byte(transferStampSep))
	if i < 0 {
		return id, 0, false
	}
	t, err := strconv.ParseUint(string(id[i+len(transferStampSep):]), 10, 64)
	if err != nil || t == 0 {
		return id[:i], 0, false
	}
	return id[:i], t, true
}

// raftView is what the receiving checks read of raft (*raft.Raft): the
// TimeoutNow check here, the snapshot check in stale_snapshot.go.
type raftView interface {
	CurrentTerm() uint64
	State() raft.RaftState
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	AppliedIndex() uint64
	LastIndex() uint64
}

// setRaft gives the wrapper the raft it forwards to, once it exists.
func (w *commitWatch) setRaft(r raftView) { w.view.Store(&r) }

// startTransfer records that this member, as leader of term, ended its
// lease of term and asks raft to transfer leadership.
func (w *commitWatch) startTransfer(term uint64) { w.transferTerm.Store(term) }

// TimeoutNow stamps the outgoing request with the term of the transfer
// coordd started (see above).
func (w *commitWatch) TimeoutNow(id raft.ServerID, target raft.ServerAddress,
	args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	term := w.transferTerm.Load()
	if term == 0 {
		return errors.New("refusing to send a TimeoutNow: no leadership transfer was started through coordd")
	}
	req := *args
	req.ID = stampTransfer(args.ID, term)
	return w.Transport.TimeoutNow(id, target, &req, resp)
}

// RequestVote tells a TimeoutNow waiting at the gate that raft has begun
// its election (it has read and raised its term).
func (w *commitWatch) RequestVote(id raft.ServerID, target raft.ServerAddress,
	args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	if t := w.awaitTerm.Load(); t != 0 && args.Term > t {
		select {
		case w.electionStarted <- struct{}{}:
		default:
		}
	}
	return w.Transport.RequestVote(id, target, args, resp)
}

// SetHeartbeatHandler installs raft's heartbeat fast path behind the gate
// (and, with fault injection, the heartbeat delay).
func (w *commitWatch) SetHeartbeatHandler(cb func(raft.RPC)) {
	if cb == nil {
		w.Transport.SetHeartbeatHandler(nil)
		return
	}
	w.Transport.SetHeartbeatHandler(func(rpc raft.RPC) {
		w.faults.holdHeartbeat(w.stop)
		w.gate.RLock()
		defer w.gate.RUnlock()
		cb(rpc)
	})
}

// refuseTimeoutNow says why a TimeoutNow from member stamped with term
// must not reach raft, or "" to hand it on.
func (w *commitWatch) refuseTimeoutNow(member []byte, term uint64, stamped bool) string {
	if !stamped {
		return "it carries no coordd transfer term (sent by an older coordd, or not by a leadership transfer)"
	}
	vp := w.view.Load()
	if vp == nil {
		return "raft is not running yet"
	}
	v := *vp
	cur := v.CurrentTerm()
	if term != cur {
		return fmt.Sprintf("it was sent for a transfer in term %d, and this member is in term %d", term, cur)
	}
	if st := v.State(); st != raft.Follower {
		return fmt.Sprintf("this member is %v, not a follower", st)
	}
	if _, leader := v.LeaderWithID(); string(leader) != string(member) {
		return fmt.Sprintf("it was sent by %s, and this member follows %q in term %d", member, leader, cur)
	}
	return ""
}

// deliverTimeoutNow checks a TimeoutNow and hands it to raft with
// heartbeats held; false means the wrapper is stopping.
func (w *commitWatch) deliverTimeoutNow(rpc raft.RPC, req *raft.TimeoutNowRequest) bool {
	w.gate.Lock()
	defer w.gate.Unlock()
	member, term, stamped := parseTransferStamp(req.ID)
	if why := w.refuseTimeoutNow(member, term, stamped); why != "" {
		w.logger.Warn("refused a leadership transfer's TimeoutNow", "from", string(member), "reason", why)
		rpc.Respond(nil, fmt.Errorf("coordd member refused the TimeoutNow: %s", why))
		w.refusedTimeoutNows.Add(1)
		return true
	}
	req.ID = member
	select {
	case <-w.electionStarted: // a stale signal
	default:
	}
	w.awaitTerm.Store(term)
	defer w.awaitTerm.Store(0)
	select {
	case w.out <- rpc:
	case <-w.stop:
		return false
	}
	bound := time.NewTimer(transferGateBound)
	defer bound.Stop()
	select {
	case <-w.electionStarted:
	case <-bound.C:
	case <-w.stop:
		return false
	}
	return true
}

// RefusedTimeoutNows counts the TimeoutNow requests this member refused.
func (n *Node) RefusedTimeoutNows() uint64 { return n.watch.refusedTimeoutNows.Load() }
