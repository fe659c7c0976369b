package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// RaftDelay holds raft messages of one kind on members (coordd
// --fault-injection, /debug/raft-delay), combined with leadership
// transfers. Its TimeoutNow variant is the schedule of a transfer whose
// TimeoutNow arrives after the term changed: the transfer to a follower
// whose incoming TimeoutNow is held fails, leadership moves to another
// follower, and the held TimeoutNow reaches its target in the new term,
// inside the new leader's lease. A member that accepted it would be
// elected there while the new leader still serves reads and allocations
// from its lease, which the linearizability and real-time checkers see.
// Not in AllKinds (members need the flag); the matrices name it.
const RaftDelay Kind = "raft-delay"

// RaftDelayKinds are the faults that need --fault-injection on every member.
var RaftDelayKinds = []Kind{RaftDelay}

// FaultInjectionArgs are the coordd flags RaftDelay needs.
var FaultInjectionArgs = []string{"--fault-injection"}

// RaftDelayer is a Cluster whose members can hold raft messages
// (harness.Cluster implements it).
type RaftDelayer interface {
	// SetRaftDelay holds every raft RPC of kind (raftnode.RPCTimeoutNow,
	// ...) member i receives for d; 0 releases them.
	SetRaftDelay(ctx context.Context, i int, kind string, d time.Duration) error
}

// The raft RPC kinds (raftnode's names; the nemesis does not link raftnode).
const (
	rpcTimeoutNow     = "timeout_now"
	rpcAppend         = "append_entries"
	rpcHeartbeat      = "heartbeat"
	rpcRequestVote    = "request_vote"
	rpcRequestPreVote = "request_pre_vote"
)

// heldTimeoutNow bounds how long the TimeoutNow variant holds the message
// (it releases it itself once leadership moved on).
const heldTimeoutNow = 30 * time.Second

func init() { faults[RaftDelay] = raftDelay{} }

type raftDelay struct{}

// run picks the variant from the step: 0 a held TimeoutNow, 1 slow
// AppendEntries into one follower, 2 slow votes everywhere during a
// transfer.
func (raftDelay) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	rd, ok := n.c.(RaftDelayer)
	if !ok {
		return errors.New("the cluster cannot delay raft messages")
	}
	l := n.leader(ctx)
	fs := n.followers(l)
	if l < 0 || len(fs) == 0 {
		return errors.New("no leader or no follower")
	}
	// Everything set here is released when the fault ends, whatever
	// happened (a restarted member starts without delays anyway).
	type set struct {
		i    int
		kind string
	}
	var done []set
	apply := func(i int, kind string, d time.Duration) error {
		if err := rd.SetRaftDelay(ctx, i, kind, d); err != nil {
			return fmt.Errorf("delay %s on %s: %w", kind, n.c.ID(i), err)
		}
		done = append(done, set{i, kind})
		return nil
	}
	defer func() {
		for _, d := range done {
			_ = rd.SetRaftDelay(context.WithoutCancel(ctx), d.i, d.kind, 0)
		}
	}()
	small := 20*time.Millisecond + time.Duration(s.SubSeed%uint64(180*time.Millisecond))
	switch s.Variant % 3 {
	case 0:
		target := fs[s.Follower%len(fs)]
		w.Targets = n.c.ID(target)
		w.Start = n.c.Now()
		// Held until the term has moved on, then released: it arrives
		// inside the next leader's lease.
		if err := apply(target, rpcTimeoutNow, heldTimeoutNow); err != nil {
			return err
		}
		w.Detail = fmt.Sprintf("TimeoutNow into %s held; transfer to it from %s", n.c.ID(target), n.c.ID(l))
		if err := n.transferTo(ctx, n.c.ID(target)); err == nil {
			w.Detail += " succeeded (unexpected while held)"
		} else {
			w.Detail += " failed"
		}
		if len(fs) > 1 {
			// The failed transfer stays in progress until its TimeoutNow
			// call times out (the transport's 2 s); retry until then.
			other := fs[(s.Follower+1)%len(fs)]
			var err error
			for attempt := 0; attempt < 15; attempt++ {
				err = n.transferTo(ctx, n.c.ID(other))
				if err != nil && strings.Contains(err.Error(), "already leads") {
					err = nil // an earlier attempt's answer was lost
				}
				if err == nil || !sleep(ctx, 300*time.Millisecond) {
					break
				}
			}
			w.Detail += fmt.Sprintf("; then to %s: %v", n.c.ID(other), errOK(err))
		}
		sleep(ctx, hold/2)
		err := rd.SetRaftDelay(ctx, target, rpcTimeoutNow, 0)
		w.Detail += fmt.Sprintf("; released %v later: %v", hold/2, errOK(err))
		sleep(ctx, hold/2)
	case 1:
		v := fs[s.Follower%len(fs)]
		w.Targets = n.c.ID(v)
		w.Detail = fmt.Sprintf("AppendEntries and heartbeats into %s delayed %v", n.c.ID(v), small.Round(time.Millisecond))
		w.Start = n.c.Now()
		if err := errors.Join(apply(v, rpcAppend, small), apply(v, rpcHeartbeat, small)); err != nil {
			return err
		}
		sleep(ctx, hold)
	default:
		w.Targets = "all"
		w.Start = n.c.Now()
		for _, i := range n.all() {
			if n.isRemoved(i) {
				continue
			}
			if err := errors.Join(apply(i, rpcRequestVote, small), apply(i, rpcRequestPreVote, small)); err != nil {
				return err
			}
		}
		err := n.transferTo(ctx, "")
		w.Detail = fmt.Sprintf("votes delayed %v everywhere; transfer from %s: %v", small.Round(time.Millisecond), n.c.ID(l), errOK(err))
		sleep(ctx, hold)
	}
	return nil
}

// transferTo asks for a leadership transfer to target ("" any member).
func (n *Nemesis) transferTo(ctx context.Context, target string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := n.admin.TransferLeader(cctx, target)
	return err
}

func errOK(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
