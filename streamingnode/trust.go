package streamingnode

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// A streaming node trusts only what coordd itself tells it over the
// connections the node opened: the coordinator term comes from heartbeat
// answers and from the assignment stream's version (its Global part is the
// term in which the leader established itself), and a PChannel's term and
// owner come from the assignment stream. A lifecycle or coordinator append
// request that carries a higher term than coordd has confirmed waits
// (Config.ConfirmTimeout at most) for coordd to confirm it, and is refused
// otherwise; so a caller cannot raise the node's coordinator fence, or the
// durable WAL fence, above what coordd really decided. See
// docs/semantics.md#streaming-node-trust.

// viewChannel is one PChannel in coordd's assignment view.
type viewChannel struct {
	term int64
	node uint64
}

// changedLocked wakes every request waiting for a confirmation. The caller
// holds n.mu.
func (n *Node) changedLocked() {
	close(n.viewCh)
	n.viewCh = make(chan struct{})
}

// kickHeartbeat asks the heartbeat loop to ask coordd now.
func (n *Node) kickHeartbeat() {
	select {
	case n.hbKick <- struct{}{}:
	default:
	}
}

// awaitConfirmed waits until ready (called with n.mu held) holds, for at
// most Config.ConfirmTimeout or until ctx ends; it reports whether it held.
// It asks for a heartbeat at once; if that and the assignment stream have
// not confirmed it after a quarter of the wait, it asks coordd for the
// PChannels directly (the stream may come from a member that is cut off).
func (n *Node) awaitConfirmed(ctx context.Context, ready func() bool) bool {
	n.mu.Lock()
	ok := ready()
	n.mu.Unlock()
	if ok { // the common case: nothing to wait for
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ConfirmTimeout)
	defer cancel()
	var ask *time.Timer
	for {
		n.mu.Lock()
		ok := ready()
		ch := n.viewCh
		n.mu.Unlock()
		if ok {
			return true
		}
		if ask == nil {
			ask = time.NewTimer(n.cfg.ConfirmTimeout / 4)
			defer ask.Stop()
		}
		n.kickHeartbeat()
		select {
		case <-ch:
		case <-ask.C:
			n.refreshView(ctx)
		case <-ctx.Done():
			return false
		}
	}
}

// refreshView reads the PChannels from coordd (linearizable, so through
// the leader; trying the next endpoint on trouble) and raises the view's
// terms and the confirmed coordinator term from the answer.
func (n *Node) refreshView(ctx context.Context) {
	for attempt := 0; attempt < len(n.pool.conns) && ctx.Err() == nil; attempt++ {
		i, conn := n.pool.pick()
		resp, err := coordpb.NewChannelsClient(conn).ListPChannels(ctx,
			&coordpb.ListPChannelsRequest{Consistency: coordpb.ReadConsistency_LINEARIZABLE})
		if err != nil {
			if !endpointTrouble(err) {
				return
			}
			n.pool.failed(i)
			continue
		}
		n.mu.Lock()
		if n.view == nil {
			n.view = map[string]viewChannel{}
		}
		for _, p := range resp.Pchannels {
			if p.Term >= n.view[p.Name].term {
				n.view[p.Name] = viewChannel{term: p.Term, node: p.NodeId}
			}
		}
		if g := resp.Version.GetGlobal(); g > n.maxCoordTerm {
			n.maxCoordTerm = g
		}
		n.changedLocked()
		n.mu.Unlock()
		return
	}
}

// confirmCoordTerm is the coordinator fence: a request from a coordinator
// term older than the newest coordd has confirmed is refused, and so is a
// term coordd does not confirm (within Config.ConfirmTimeout).
func (n *Node) confirmCoordTerm(ctx context.Context, t uint64) error {
	if t == 0 {
		return invalid("coord_term is required")
	}
	ok := n.awaitConfirmed(ctx, func() bool { return t <= n.maxCoordTerm })
	n.mu.Lock()
	confirmed := n.maxCoordTerm
	n.mu.Unlock()
	if !ok {
		return status.Errorf(codes.Unavailable, "coordinator term %d is not confirmed by coordd, which reports term %d; refused",
			t, confirmed)
	}
	return n.checkCoordTerm(t)
}

// checkCoordTerm refuses a coordinator term older than the newest confirmed
// one (no waiting).
func (n *Node) checkCoordTerm(t uint64) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t < n.maxCoordTerm {
		return precondition("stale coordinator term: the request carries coordinator term %d, this node has seen term %d", t, n.maxCoordTerm)
	}
	return nil
}

// confirmAssign checks an Assign's PChannel term against coordd's
// assignment view: the view must hold pchannel at exactly term on this
// node. A term above the view waits for the view to catch up.
func (n *Node) confirmAssign(ctx context.Context, pchannel string, term int64) error {
	var vc viewChannel
	var me uint64
	ok := n.awaitConfirmed(ctx, func() bool {
		vc, me = n.view[pchannel], n.nodeID
		return vc.term >= term
	})
	switch {
	case !ok:
		return status.Errorf(codes.Unavailable, "pchannel %s term %d is not confirmed by coordd's assignment view (it holds term %d); refused",
			pchannel, term, vc.term)
	case vc.term != term:
		return precondition("stale pchannel term: coordd's assignment view holds pchannel %s at term %d, the request carries term %d",
			pchannel, vc.term, term)
	case vc.node != me:
		return precondition("wrong node: coordd's assignment view assigns pchannel %s at term %d to node %d, this is node %d",
			pchannel, term, vc.node, me)
	}
	return nil
}

// confirmRemove checks a Remove's PChannel term against coordd's
// assignment view: coordd removes a term only after it committed a newer
// one (the balancer removes the history terms of a channel it is moving,
// docs/architecture.md#fencing), so the view must hold pchannel at a term
// strictly above the one removed. A Remove of the current term (or a
// newer one) is one coordd did not decide and is refused once the wait for
// the view runs out: it would take a WAL coordd still counts as ASSIGNED
// offline.
func (n *Node) confirmRemove(ctx context.Context, pchannel string, term int64) error {
	var vc viewChannel
	if n.awaitConfirmed(ctx, func() bool { vc = n.view[pchannel]; return vc.term > term }) {
		return nil
	}
	return status.Errorf(codes.Unavailable, "pchannel %s term %d is not confirmed by coordd's assignment view as removable (it holds term %d; coordd removes a term only after assigning a newer one); refused",
		pchannel, term, vc.term)
}

// checkIdentity refuses a request meant for another registration (another
// node ID, or an earlier session of this one), e.g. one sent to an address
// a different process now serves.
func (n *Node) checkIdentity(nodeID, epoch uint64) error {
	if nodeID == 0 || epoch == 0 {
		return invalid("node_id and epoch are required (the registration the request is meant for), got %d and %d", nodeID, epoch)
	}
	id, ep := n.Session()
	if nodeID != id || epoch != ep {
		return precondition("wrong node: the request is meant for streaming node %d epoch %d, this is node %d epoch %d at %s",
			nodeID, epoch, id, ep, n.addr)
	}
	return nil
}

// applyView merges an assignment update into the view (the caller holds
// n.mu) and raises the confirmed coordinator term to its version's Global.
func (n *Node) applyViewLocked(upd *coordpb.AssignmentUpdate) {
	if upd.Full || n.view == nil {
		n.view = map[string]viewChannel{}
	}
	for _, c := range upd.Channels {
		n.view[c.Pchannel] = viewChannel{term: c.Term, node: c.NodeId}
	}
	if g := upd.Version.GetGlobal(); g > n.maxCoordTerm {
		n.maxCoordTerm = g
	}
	n.changedLocked()
}
