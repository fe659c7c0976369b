package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// A DML producer: Insert writes rows with fresh primary keys to a
// collection's VChannels through the streaming nodes that own them
// (StreamingNodeService.Insert), so a flush has something to persist.

// DefaultInsertBatch is how many rows one insert message carries at most.
const DefaultInsertBatch = 8192

// InsertResult describes rows Insert wrote: primary keys FirstPK..LastPK,
// one contiguous range from coordd's ID allocator.
type InsertResult struct {
	CollectionID int64
	FirstPK      int64
	LastPK       int64
	Count        uint32
	// Messages is how many WAL messages carry them; VChannels how many
	// VChannels they were spread over.
	Messages  int
	VChannels int
}

// Insert writes rows rows (1..MaxAllocCount) to collectionID's VChannels:
// it allocates the primary keys as one range, deals them round-robin over
// the VChannels, sends them in messages of at most batch rows (0:
// DefaultInsertBatch) to the owner of each VChannel's PChannel and returns
// once every message is in a WAL. Each message is idempotent (its first
// primary key is its dedup ID), so a message retried after a lost answer
// or an ownership change is written once.
func (c *Client) Insert(ctx context.Context, collectionID, partitionID int64, rows uint32, batch int) (*InsertResult, error) {
	switch {
	case collectionID <= 0:
		return nil, localError("Insert", fmt.Errorf("collection id must be positive"))
	case partitionID < 0:
		return nil, localError("Insert", fmt.Errorf("partition id must not be negative"))
	case rows == 0 || rows > MaxAllocCount:
		return nil, localError("Insert", fmt.Errorf("rows must be in 1..%d, got %d", MaxAllocCount, rows))
	}
	if batch <= 0 {
		batch = DefaultInsertBatch
	}
	cs, err := c.ListVirtualChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE, collectionID)
	if err != nil {
		return nil, err
	}
	var vchs []string
	for _, cv := range cs {
		if cv.CollectionId == collectionID {
			for _, v := range cv.Vchannels {
				if !vocab.IsCChannel(v) {
					vchs = append(vchs, v)
				}
			}
		}
	}
	if len(vchs) == 0 {
		return nil, localError("Insert", status.Errorf(codes.NotFound, "collection %d has no vchannels", collectionID))
	}
	first, n, err := c.AllocID(ctx, rows)
	if err != nil {
		return nil, err
	}
	if n != rows {
		return nil, localError("Insert", fmt.Errorf("the allocator returned %d ids, asked for %d", n, rows))
	}
	res := &InsertResult{CollectionID: collectionID, FirstPK: int64(first), LastPK: int64(first) + int64(rows) - 1, Count: rows}
	p := &producer{c: c, conns: map[string]*grpc.ClientConn{}}
	defer p.close()
	// One sender per VChannel, in parallel; the first error stops them all.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i, v := range vchs {
		var pks []int64
		for pk := int64(first) + int64(i); pk <= res.LastPK; pk += int64(len(vchs)) {
			pks = append(pks, pk)
		}
		if len(pks) == 0 {
			continue
		}
		res.VChannels++
		wg.Add(1)
		go func() {
			defer wg.Done()
			for len(pks) > 0 {
				k := min(batch, len(pks))
				err := p.send(sctx, &coordpb.InsertRequest{Vchannel: v, CollectionId: collectionID, PartitionId: partitionID,
					Pks: pks[:k], DedupId: uint64(pks[0])})
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				res.Messages++
				mu.Unlock()
				pks = pks[k:]
			}
		}()
	}
	wg.Wait()
	return res, firstErr
}

// producer sends insert messages for Insert's VChannel senders.
type producer struct {
	c *Client

	mu     sync.Mutex // guards the maps
	conns  map[string]*grpc.ClientConn
	owners map[string]*coordpb.PChannel
	epochs map[uint64]uint64 // streaming node ID -> epoch
	nodes  map[uint64]*coordpb.StreamingNode
	seenAt time.Time // when owners and nodes were read
}

// owner returns pchannel's assignment and its node's epoch (0: not a live
// node), looking the assignments up again when refresh is set.
func (p *producer) owner(ctx context.Context, pchannel string, refresh bool) (*coordpb.PChannel, uint64, error) {
	p.mu.Lock()
	known := p.owners != nil
	p.mu.Unlock()
	if !known || refresh {
		resp, err := p.c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
		if err != nil {
			return nil, 0, err
		}
		nodes, err := p.c.ListNodes(ctx, coordpb.ReadConsistency_LINEARIZABLE, false)
		if err != nil {
			return nil, 0, err
		}
		owners, epochs, byID := map[string]*coordpb.PChannel{}, map[uint64]uint64{}, map[uint64]*coordpb.StreamingNode{}
		for _, pc := range resp.Pchannels {
			owners[pc.Name] = pc
		}
		for _, n := range nodes {
			epochs[n.Id] = n.Epoch
			byID[n.Id] = n
		}
		p.mu.Lock()
		p.owners, p.epochs, p.nodes, p.seenAt = owners, epochs, byID, time.Now()
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	pc := p.owners[pchannel]
	if pc == nil {
		return nil, 0, nil
	}
	return pc, p.epochs[pc.NodeId], nil
}

// conn returns the connection to a streaming node.
func (p *producer) conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc, ok := p.conns[addr]; ok {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, StreamingNodeDialOptions(p.c.cfg.TLS)...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = cc
	return cc, nil
}

func (p *producer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cc := range p.conns {
		cc.Close()
	}
}

// send delivers one insert to the current owner of its PChannel, looking
// the owner up again after an answer that says it moved.
func (p *producer) send(ctx context.Context, req *coordpb.InsertRequest) error {
	pch := vocab.PChannelOf(req.Vchannel)
	var last error
	var since time.Time // first failed attempt of this call
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if since.IsZero() {
				since = time.Now()
			}
			if err := sleep(ctx, min(time.Duration(attempt)*100*time.Millisecond, time.Second)); err != nil {
				// The wait explains itself: which PChannel, whose, since
				// when and when coordd acts (docs/semantics.md#insert-waits).
				return &Error{Op: "Insert", Err: status.Errorf(codes.Unavailable, "%v; waited from %s, gave up after %v (%v)", last, since.Format("15:04:05.000"), time.Since(since).Round(time.Millisecond), err), Stopped: err}
			}
		}
		pc, epoch, err := p.owner(ctx, pch, attempt > 0)
		if err != nil {
			return err
		}
		if pc == nil || pc.NodeAddress == "" || pc.State != "ASSIGNED" {
			last = p.waitReason(pch, pc, nil)
			continue
		}
		if epoch == 0 {
			// The owner is not a live node (it died and the PChannel has
			// not moved yet): wait for the move.
			last = p.waitReason(pch, pc, nil)
			continue
		}
		cc, err := p.conn(pc.NodeAddress)
		if err != nil {
			return &Error{Op: "Insert", Err: err}
		}
		req.Term, req.NodeId, req.Epoch = pc.Term, pc.NodeId, epoch
		actx, cancel := context.WithTimeout(ctx, p.c.cfg.RequestTimeout)
		_, err = coordpb.NewStreamingNodeServiceClient(cc).Insert(actx, req)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.DataLoss,
			codes.Unauthenticated, codes.PermissionDenied: // a secure node wants a proxy certificate (Config.TLS)
			return &Error{Op: "Insert", Err: err}
		}
		if ctx.Err() != nil {
			return &Error{Op: "Insert", Err: fmt.Errorf("%w (last error: %v)", ctx.Err(), err)}
		}
		last = p.waitReason(pch, pc, err) // not the owner any more, a newer term, unavailable: look again
	}
}

// waitReason says why an insert into pch cannot be delivered now: the
// PChannel, its owner, and when coordd acts — the owner's node TTL runs out
// (it is marked DOWN and the PChannel moves) or the reassignment in flight
// completes. cause is the owner's own answer, if it was reached.
func (p *producer) waitReason(pch string, pc *coordpb.PChannel, cause error) error {
	p.mu.Lock()
	var n *coordpb.StreamingNode
	if pc != nil {
		n = p.nodes[pc.NodeId]
	}
	seenAt := p.seenAt
	p.mu.Unlock()
	return explainWait(pch, pc, n, cause, seenAt)
}

// explainWait is waitReason's text, pure in its inputs (seenAt: when pc and
// n were read).
func explainWait(pch string, pc *coordpb.PChannel, n *coordpb.StreamingNode, cause error, seenAt time.Time) error {
	clock := func(t time.Time) string { return t.Format("15:04:05.000") }
	switch {
	case pc == nil || pc.NodeId == 0:
		return fmt.Errorf("pchannel %s has no streaming node yet: coordd places it as soon as a node is UP (coordctl node list)", pch)
	case pc.State == "ASSIGNING":
		msg := fmt.Sprintf("pchannel %s is being reassigned to streaming node %d at term %d", pch, pc.NodeId, pc.Term)
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
		return fmt.Errorf("pchannel %s is %s (owner streaming node %d)", pch, pc.State, pc.NodeId)
	case n == nil || n.Epoch == 0:
		return fmt.Errorf("pchannel %s is assigned to streaming node %d, which is not live (DOWN): coordd is moving it to a live node", pch, pc.NodeId)
	}
	owner := fmt.Sprintf("streaming node %d (%s)", n.Id, n.Address)
	msg := fmt.Sprintf("pchannel %s: its owner %s", pch, owner)
	if cause != nil {
		msg += fmt.Sprintf(" did not take the insert (%s)", status.Convert(cause).Message())
	}
	if answered(cause) && n.LastHeartbeatMsAgo >= 0 {
		// The node itself refused: it is live, and coordd moves a
		// PChannel only off a node that stops heartbeating, so no move is
		// coming; the node's answer is the reason.
		last := seenAt.Add(-time.Duration(n.LastHeartbeatMsAgo) * time.Millisecond)
		return errors.New(msg + "; it is live (last heartbeat " + clock(last) + "), so coordd does not move the pchannel: the insert is retried until the node takes it")
	}
	if n.LastHeartbeatMsAgo >= 0 {
		last := seenAt.Add(-time.Duration(n.LastHeartbeatMsAgo) * time.Millisecond)
		if cause != nil {
			msg += "; last heartbeat " + clock(last)
		} else {
			msg += " has not heartbeated since " + clock(last)
		}
		if n.NodeTtlMs > 0 {
			msg += fmt.Sprintf(", so coordd marks it DOWN and moves the pchannel at about %s (node TTL %v)",
				clock(last.Add(time.Duration(n.NodeTtlMs)*time.Millisecond)), time.Duration(n.NodeTtlMs)*time.Millisecond)
		}
	} else {
		msg += "; coordd moves the pchannel once the node misses its heartbeat TTL (--node-ttl)"
	}
	return errors.New(msg)
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
// node the leader has not heard from for over a second, with when coordd
// acts. "" when the owner looks healthy.
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
	return explainWait(pchannel, pc, n, nil, seenAt).Error(), nil
}

// StreamingNodeStatus asks the streaming node at addr for its Status (the
// WALs it holds, its session), over the same connection kind inserts use.
func (c *Client) StreamingNodeStatus(ctx context.Context, addr string) (*coordpb.NodeStatusResponse, error) {
	cc, err := grpc.NewClient(addr, StreamingNodeDialOptions(c.cfg.TLS)...)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	return coordpb.NewStreamingNodeServiceClient(cc).Status(ctx, &coordpb.NodeStatusRequest{})
}
