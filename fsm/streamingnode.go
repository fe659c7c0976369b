package fsm

import (
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// DefaultResourceGroup is used when a node registers without one.
const DefaultResourceGroup = "__default_resource_group"

// applyRegisterStreamingNode gives a streaming node process an ID (never
// reused) and an epoch (this entry's index). A retry by the same process
// (same address and incarnation) gets its first answer back; another
// process at a live node's address is refused unless the leader has judged
// that node dead and names it in replace_node_id. The record keeps the
// registering credential's node identity (bound_node) for its whole life;
// a retry must come from the same identity.
func applyRegisterStreamingNode(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.RegisterStreamingNode)
	if live := next.liveNodeAt(b.Address); live != nil {
		switch {
		case live.Incarnation == b.Incarnation && live.BoundNode != b.BoundNode:
			return reject(logpb.RejectCode_REJECT_CONFLICT,
				"address %s is held by live streaming node %d of node identity %d, not %d", b.Address, live.Id, live.BoundNode, b.BoundNode)
		case live.Incarnation == b.Incarnation:
			return registerResult(live)
		case live.Id != b.ReplaceNodeId:
			return reject(logpb.RejectCode_REJECT_CONFLICT,
				"address %s is held by live streaming node %d (incarnation %s)", b.Address, live.Id, live.Incarnation)
		}
		next.bumpVersion()
		down := cloneNode(live)
		down.State, down.Reason = logpb.NodeState_NODE_DOWN, "replaced by incarnation "+b.Incarnation
		next.putNode(down)
	} else {
		next.bumpVersion()
	}
	rg := b.ResourceGroup
	if rg == "" {
		rg = DefaultResourceGroup
	}
	n := &logpb.StreamingNodeRecord{
		Id: next.ch.meta.NextNodeId, Address: b.Address, ResourceGroup: rg, Incarnation: b.Incarnation,
		Epoch: next.applied, State: logpb.NodeState_NODE_UP, RegisteredMs: c.ProposedAtUnixMs,
		RegisteredVersion: next.AssignmentVersion().Proto(), BoundNode: b.BoundNode,
	}
	next.setMeta(func(m *logpb.ChannelsMeta) { m.NextNodeId++ })
	next.putNode(n)
	next.evictDownNodes()
	return registerResult(n)
}

func registerResult(n *logpb.StreamingNodeRecord) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_RegisterNode{RegisterNode: &logpb.RegisterNodeResult{
		NodeId: n.Id, Epoch: n.Epoch, Version: n.RegisteredVersion}}}
}

// liveNodeAt finds the UP or DRAINING node registered at address.
func (s *State) liveNodeAt(address string) *logpb.StreamingNodeRecord {
	for it := s.ch.nodes.Iterator(); !it.Done(); {
		_, n, _ := it.Next()
		if n.Address == address && n.State != logpb.NodeState_NODE_DOWN {
			return n
		}
	}
	return nil
}

// applyMarkStreamingNodeDown records that a node's session ended (missed
// heartbeats, or it deregistered). Its channels are then reassigned by the
// balancer with new terms. The epoch guard keeps a late report about an
// earlier registration from touching a newer one.
func applyMarkStreamingNodeDown(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.MarkStreamingNodeDown)
	n, ok := next.ch.nodes.Get(b.NodeId)
	if !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "streaming node %d does not exist", b.NodeId)
	}
	if b.Epoch != 0 && b.Epoch != n.Epoch {
		return reject(logpb.RejectCode_REJECT_STALE, "streaming node %d has epoch %d, not %d", b.NodeId, n.Epoch, b.Epoch)
	}
	if n.State == logpb.NodeState_NODE_DOWN {
		return accepted()
	}
	next.bumpVersion()
	nn := cloneNode(n)
	nn.State, nn.Reason = logpb.NodeState_NODE_DOWN, b.Reason
	next.putNode(nn)
	next.evictDownNodes()
	return accepted()
}

// applySetStreamingNodeDrain starts or stops draining a live node: a
// draining node gets no new channels and the balancer moves its channels
// off. The drain is in the log, so a new leader continues it.
func applySetStreamingNodeDrain(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.SetStreamingNodeDrain)
	n, ok := next.ch.nodes.Get(b.NodeId)
	if !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "streaming node %d does not exist", b.NodeId)
	}
	if n.State == logpb.NodeState_NODE_DOWN {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "streaming node %d is down", b.NodeId)
	}
	want := logpb.NodeState_NODE_UP
	if b.Draining {
		want = logpb.NodeState_NODE_DRAINING
	}
	if n.State == want {
		return accepted()
	}
	next.bumpVersion()
	nn := cloneNode(n)
	nn.State, nn.Reason = want, b.Reason
	next.putNode(nn)
	return accepted()
}

// evictDownNodes keeps at most MaxDownNodes DOWN records, dropping the
// oldest; watchers older than the eviction must then take a full view.
func (next *State) evictDownNodes() {
	down := 0
	for it := next.ch.nodes.Iterator(); !it.Done(); {
		_, n, _ := it.Next()
		if n.State == logpb.NodeState_NODE_DOWN {
			down++
		}
	}
	for it := next.ch.nodes.Iterator(); down > MaxDownNodes && !it.Done(); {
		id, n, _ := it.Next()
		if n.State != logpb.NodeState_NODE_DOWN {
			continue
		}
		next.ch.nodes = next.ch.nodes.Delete(id)
		down--
		v := next.AssignmentVersion().Proto()
		next.setMeta(func(m *logpb.ChannelsMeta) { m.DeltaFloor = v })
	}
}
