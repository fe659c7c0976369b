package streamingnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// The node's session with coordd: registration, heartbeats, and the
// controlled shutdown (drain, then deregister).

func (n *Node) drain(ctx context.Context, id, epoch uint64) {
	n.log.Info("controlled shutdown: asking coordd to drain", "node_id", id)
	var held []string
	for {
		i, conn := n.pool.pick()
		cctx, cancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
		resp, err := coordpb.NewStreamingNodeRegistryClient(conn).RequestDrain(cctx, &coordpb.NodeSessionRequest{NodeId: id, Epoch: epoch})
		cancel()
		switch {
		case err == nil && len(resp.Pchannels) == 0:
			n.log.Info("drained", "node_id", id)
			return
		case err == nil:
			held = resp.Pchannels
			if !n.otherNodeUp(id) {
				n.log.Warn("no other streaming node is UP to take the channels; not waiting for the drain", "node_id", id, "pchannels", held)
				return
			}
		case sessionGone(err):
			n.log.Info("session already ended; skipping drain", "node_id", id, "error", err)
			return
		default:
			n.pool.failed(i)
			n.log.Debug("RequestDrain failed", "error", err)
		}
		if !sleepCtx(ctx, 200*time.Millisecond) {
			n.log.Warn("drain did not finish in time; deregistering anyway", "node_id", id, "pchannels", held)
			return
		}
	}
}

// otherNodeUp reports whether, as far as the assignment stream tells, a
// node other than id is UP (true when the stream has not said yet).
func (n *Node) otherNodeUp(id uint64) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.liveNodes == nil {
		return true
	}
	for nid, st := range n.liveNodes {
		if nid != id && st == "UP" {
			return true
		}
	}
	return false
}

func (n *Node) deregister(ctx context.Context, id, epoch uint64) {
	// Deregistering matters even when the drain budget ran out.
	if ctx.Err() != nil && n.killCtx.Err() == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(n.killCtx, 5*time.Second)
		defer cancel()
	}
	for {
		i, conn := n.pool.pick()
		cctx, cancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
		_, err := coordpb.NewStreamingNodeRegistryClient(conn).Deregister(cctx, &coordpb.NodeSessionRequest{NodeId: id, Epoch: epoch})
		cancel()
		if err == nil || sessionGone(err) {
			n.log.Info("deregistered", "node_id", id)
			return
		}
		n.pool.failed(i)
		if !sleepCtx(ctx, 100*time.Millisecond) {
			n.log.Warn("could not deregister; coordd will notice the missing heartbeats", "node_id", id, "error", err)
			return
		}
	}
}

// ---- session: register, heartbeat, register again ----

func newIncarnation() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Sprintf("%x", time.Now().UnixNano())
	}
	return hex.EncodeToString(b[:])
}

func (n *Node) sessionLoop(ctx context.Context) {
	for {
		if !n.register(ctx) {
			return
		}
		n.heartbeatLoop(ctx)
		n.mu.Lock()
		stop := n.draining
		n.mu.Unlock()
		if stop || ctx.Err() != nil {
			return
		}
	}
}

// register registers a new session, retrying until it succeeds or ctx
// ends. Retries reuse the incarnation, so a retried registration that did
// commit gets the same node ID back.
func (n *Node) register(ctx context.Context) bool {
	inc := newIncarnation()
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		i, conn := n.pool.pick()
		cctx, cancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
		resp, err := coordpb.NewStreamingNodeRegistryClient(conn).RegisterStreamingNode(cctx, &coordpb.RegisterStreamingNodeRequest{
			Address: n.addr, ResourceGroup: n.cfg.ResourceGroup, Incarnation: inc})
		cancel()
		if err == nil {
			n.mu.Lock()
			n.nodeID, n.epoch, n.incarnation = resp.NodeId, resp.Epoch, inc
			n.mu.Unlock()
			n.log.Info("registered with coordd", "node_id", resp.NodeId, "epoch", resp.Epoch, "incarnation", inc,
				"registered_version", fmtVersion(resp.RegisteredVersion), "endpoint", n.pool.addrs[i])
			n.saveIdentity(resp.NodeId, resp.Epoch, inc)
			n.regOnce.Do(func() { close(n.registered) })
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if endpointTrouble(err) {
			n.pool.failed(i)
		}
		if attempt <= 3 || attempt%20 == 0 {
			n.log.Warn("registration failed; retrying", "endpoint", n.pool.addrs[i], "attempt", attempt, "error", err)
		}
		if !sleepCtx(ctx, backoff) {
			return false
		}
		backoff = min(2*backoff, time.Second)
	}
}

// heartbeatLoop heartbeats until the session ends (coordd no longer knows
// the node, or says it is DOWN: the WALs are closed and the caller
// registers again) or ctx ends.
func (n *Node) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(n.cfg.HeartbeatInterval)
	defer t.Stop()
	failures := 0
	for {
		n.mu.Lock()
		req := &coordpb.HeartbeatRequest{NodeId: n.nodeID, Epoch: n.epoch, HeartbeatIntervalMs: n.cfg.HeartbeatInterval.Milliseconds()}
		if n.seen != nil {
			req.SeenVersion = proto.Clone(n.seen).(*coordpb.Version)
		}
		n.mu.Unlock()
		// What the node really has open, read after the session: coordd
		// reassigns a channel its owner stops listing (a lost WAL).
		req.Held, req.HeldReported = n.heldWALs(), true
		i, conn := n.pool.pick()
		cctx, cancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
		resp, err := coordpb.NewStreamingNodeRegistryClient(conn).Heartbeat(cctx, req)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && resp.State != "DOWN":
			n.seeCoordTerm(resp.CoordTerm)
			if failures > 0 {
				n.log.Info("heartbeats answered again", "node_id", req.NodeId, "after_failures", failures)
			}
			failures = 0
		case err == nil || sessionGone(err):
			if err == nil {
				err = fmt.Errorf("coordd reports the node DOWN")
			}
			n.log.Warn("session lost; closing WALs and registering again", "node_id", req.NodeId, "epoch", req.Epoch, "error", err)
			n.mu.Lock()
			n.nodeID, n.epoch = 0, 0
			n.mu.Unlock()
			n.closeAllWALs("session lost")
			return
		default:
			failures++
			n.pool.failed(i)
			if failures <= 3 || failures%20 == 0 {
				n.log.Warn("heartbeat failed", "endpoint", n.pool.addrs[i], "failures", failures, "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.hbKick:
		}
	}
}

// heldWALs lists the WALs this node has open (RW or RO), by name.
func (n *Node) heldWALs() []*coordpb.HeldPChannel {
	var held []*coordpb.HeldPChannel
	for _, w := range n.Status().Wals {
		held = append(held, &coordpb.HeldPChannel{Pchannel: w.Pchannel, Term: w.Term})
	}
	return held
}

// seeCoordTerm raises the confirmed coordinator term to the one a
// heartbeat answer reported.
func (n *Node) seeCoordTerm(t uint64) {
	n.mu.Lock()
	if t > n.maxCoordTerm {
		n.maxCoordTerm = t
		n.changedLocked()
	}
	n.mu.Unlock()
}

// ---- assignment stream ----

func versionLess(a, b *coordpb.Version) bool {
	if a.GetGlobal() != b.GetGlobal() {
		return a.GetGlobal() < b.GetGlobal()
	}
	return a.GetLocal() < b.GetLocal()
}

func fmtVersion(v *coordpb.Version) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("(%d,%d)", v.Global, v.Local)
}
