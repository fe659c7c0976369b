package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// Why an insert waits, in words (docs/semantics.md#insert-waits): the
// PChannel and its state, its owner and the owner's state, and what coordd
// will do next. A move is promised only when some other streaming node is
// UP to take the PChannel: coordd's balancer places PChannels on UP,
// heartbeating nodes only, so with none there is nowhere to move to.

// explainWait is the reason an insert into pch cannot be delivered now,
// pure in its inputs: pc is the PChannel's record, n its owner's session
// (nil when the owner is not live), nodes every live session, cause the
// owner's own answer if it was reached, seenAt when pc and nodes were read.
func explainWait(pch string, pc *coordpb.PChannel, n *coordpb.StreamingNode, nodes []*coordpb.StreamingNode, cause error, seenAt time.Time) error {
	clock := func(t time.Time) string { return t.Format("15:04:05.000") }
	var owner uint64
	if pc != nil {
		owner = pc.NodeId
	}
	up := upElsewhere(nodes, owner)
	switch {
	case pc == nil || pc.NodeId == 0:
		if up == 0 {
			return fmt.Errorf("pchannel %s has no streaming node yet and no streaming node is UP: coordd places it when one registers (start one; coordctl node list)", pch)
		}
		return fmt.Errorf("pchannel %s has no streaming node yet: coordd is placing it on one of the %d UP node(s) (coordctl node list)", pch, up)
	case pc.State == "ASSIGNING":
		msg := fmt.Sprintf("pchannel %s is ASSIGNING: being reassigned to streaming node %d at term %d", pch, pc.NodeId, pc.Term)
		if pc.LastAssignUnixMs > 0 {
			msg += " (previous assignment " + clock(time.UnixMilli(pc.LastAssignUnixMs)) + ")"
		}
		if pc.LastError != "" {
			msg += fmt.Sprintf("; attempt %d failed at %s: %s; coordd retries with backoff", pc.FailedAttempts, clock(time.UnixMilli(pc.LastErrorUnixMs)), pc.LastError)
		} else {
			msg += "; coordd completes it once the node opens the WAL"
		}
		return errors.New(msg)
	case pc.State != "ASSIGNED":
		msg := fmt.Sprintf("pchannel %s is %s (owner streaming node %d)", pch, pc.State, pc.NodeId)
		if up == 0 && (n == nil || n.Epoch == 0) {
			return errors.New(msg + "; no streaming node is UP, so coordd cannot place it until one registers (coordctl node list)")
		}
		return errors.New(msg + "; coordd places it again on a live node (coordctl pchannel list)")
	case n == nil || n.Epoch == 0:
		msg := fmt.Sprintf("pchannel %s is ASSIGNED to streaming node %d, whose session has ended (DOWN)", pch, pc.NodeId)
		if up == 0 {
			return errors.New(msg + "; no streaming node is UP, so coordd has nowhere to move it: the insert can go through only once a node registers (start one, or resume a paused one; coordctl node list)")
		}
		return fmt.Errorf("%s; coordd is moving it to one of the %d UP node(s)", msg, up)
	}
	state := n.State
	if n.Silent {
		state += ", SILENT: heartbeat late" // the leader's judgement (docs/operations.md#silent-streaming-nodes)
	}
	msg := fmt.Sprintf("pchannel %s (ASSIGNED): its owner streaming node %d (%s, %s)", pch, n.Id, n.Address, state)
	switch {
	case cause == nil:
	case status.Code(cause) == codes.DeadlineExceeded:
		msg += fmt.Sprintf(" did not answer in time (%s)", status.Convert(cause).Message())
	default:
		msg += fmt.Sprintf(" did not take the insert (%s)", status.Convert(cause).Message())
	}
	if answered(cause) && n.LastHeartbeatMsAgo >= 0 {
		// The node itself refused: it is live, and coordd moves a
		// PChannel only off a node that stops heartbeating, so no move is
		// coming; the node's answer is the reason.
		last := seenAt.Add(-time.Duration(n.LastHeartbeatMsAgo) * time.Millisecond)
		return errors.New(msg + "; it is live (last heartbeat " + clock(last) + "), so coordd does not move the pchannel: the insert is retried until the node takes it")
	}
	if n.LastHeartbeatMsAgo < 0 {
		if up == 0 {
			return errors.New(msg + "; once the node misses its heartbeat TTL (--node-ttl) coordd marks it DOWN, but no other streaming node is UP to take the pchannel")
		}
		return errors.New(msg + "; coordd moves the pchannel once the node misses its heartbeat TTL (--node-ttl)")
	}
	last := seenAt.Add(-time.Duration(n.LastHeartbeatMsAgo) * time.Millisecond)
	if cause != nil {
		msg += "; last heartbeat " + clock(last)
	} else {
		msg += " has not heartbeated since " + clock(last)
	}
	if n.NodeTtlMs <= 0 {
		return errors.New(msg)
	}
	ttl := time.Duration(n.NodeTtlMs) * time.Millisecond
	down := clock(last.Add(ttl))
	if up == 0 {
		return fmt.Errorf("%s, so coordd marks it DOWN at about %s (node TTL %v); no other streaming node is UP, so the pchannel cannot move: the insert can go through only once this node answers again or another registers", msg, down, ttl)
	}
	return fmt.Errorf("%s, so coordd marks it DOWN and moves the pchannel at about %s (node TTL %v; %d other node(s) UP)", msg, down, ttl, up)
}

// upElsewhere counts the sessions other than owner that coordd could move
// a PChannel to: UP (not draining), not judged silent by the leader and,
// where the age is known, heard from within their TTL.
func upElsewhere(nodes []*coordpb.StreamingNode, owner uint64) int {
	up := 0
	for _, x := range nodes {
		if x.Id == owner || x.State != "UP" || x.Epoch == 0 || x.Silent {
			continue
		}
		if x.LastHeartbeatMsAgo >= 0 && x.NodeTtlMs > 0 && x.LastHeartbeatMsAgo >= x.NodeTtlMs {
			continue
		}
		up++
	}
	return up
}

// answered: err is the streaming node's own refusal, not a failure to
// reach it (unavailable, timed out, canceled).
func answered(err error) bool {
	switch status.Code(err) {
	case codes.OK, codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
		return false
	}
	return true
}

// OwnerTrouble says what is wrong with pchannel's owner, for a waiter that
// wants to explain itself (`coordctl flush --wait` progress): a PChannel
// without an owner, being reassigned, on a node that is not live, or on a
// node the leader has not heard from for over a second, with what coordd
// does next. "" when the owner looks healthy.
func (c *Client) OwnerTrouble(ctx context.Context, pchannel string) (string, error) {
	resp, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		return "", err
	}
	nodes, err := c.ListNodes(ctx, coordpb.ReadConsistency_LINEARIZABLE, false)
	if err != nil {
		return "", err
	}
	seenAt := time.Now()
	var pc *coordpb.PChannel
	for _, p := range resp.Pchannels {
		if p.Name == pchannel {
			pc = p
		}
	}
	var n *coordpb.StreamingNode
	for _, x := range nodes {
		if pc != nil && x.Id == pc.NodeId {
			n = x
		}
	}
	if pc != nil && pc.State == "ASSIGNED" && n != nil && n.Epoch != 0 && n.LastHeartbeatMsAgo >= 0 && n.LastHeartbeatMsAgo < 1000 {
		return "", nil
	}
	if pc != nil && pc.State == "ASSIGNED" && n != nil && n.Epoch != 0 && n.LastHeartbeatMsAgo < 0 {
		return "", nil // no heartbeat age (not answered by the leader): nothing to say
	}
	return explainWait(pchannel, pc, n, nodes, nil, seenAt).Error(), nil
}
