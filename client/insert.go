package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// Acknowledged is how many rows the WALs acknowledged: Count when
	// Insert succeeds, possibly fewer when it fails (an insert over several
	// VChannels is not atomic); Unacknowledged names the VChannels whose
	// rows were not all acknowledged.
	Acknowledged   uint32
	Unacknowledged []string
}

// Insert writes rows rows (1..MaxAllocCount) to collectionID's VChannels:
// it allocates the primary keys as one range, deals them round-robin over
// the VChannels, sends them in messages of at most batch rows (0:
// DefaultInsertBatch) to the owner of each VChannel's PChannel and returns
// once every message is in a WAL. On failure it returns the result so far
// with the error: the error says how many rows were acknowledged and which
// VChannels failed. Each message is idempotent (its first
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
	start := time.Now() // a wait's error counts from here: the caller has waited since
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
	p := &producer{c: c, conns: map[string]*grpc.ClientConn{}, start: start}
	defer p.close()
	// One sender per VChannel, in parallel; the first error stops them all.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex // guards res, progress and failed
	var failed *vchannelProgress
	progress := make([]*vchannelProgress, 0, len(vchs))
	for i, v := range vchs {
		var pks []int64
		for pk := int64(first) + int64(i); pk <= res.LastPK; pk += int64(len(vchs)) {
			pks = append(pks, pk)
		}
		if len(pks) == 0 {
			continue
		}
		vp := &vchannelProgress{VChannel: v, Rows: uint32(len(pks))}
		progress = append(progress, vp)
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
					vp.Err, vp.Stopped = err, failed != nil
					if failed == nil {
						failed = vp
					}
					mu.Unlock()
					cancel()
					return
				}
				vp.Acked += uint32(k)
				res.Acknowledged += uint32(k)
				res.Messages++
				mu.Unlock()
				pks = pks[k:]
			}
		}()
	}
	wg.Wait()
	if failed == nil {
		return res, nil
	}
	for _, vp := range progress {
		if vp.Acked < vp.Rows {
			res.Unacknowledged = append(res.Unacknowledged, vp.VChannel)
		}
	}
	return res, partialInsertError(res, progress, failed)
}

// vchannelProgress is how far Insert got on one VChannel: Acked of its
// Rows are in its WAL; Err is why it stopped (Stopped: because another
// VChannel failed first).
type vchannelProgress struct {
	VChannel    string
	Rows, Acked uint32
	Err         error
	Stopped     bool
}

// partialInsertError is a failed Insert's error: the first failure's
// reason, and how much of the insert is known to be written — an insert
// over several VChannels is not atomic (docs/semantics.md#insert-waits).
func partialInsertError(res *InsertResult, progress []*vchannelProgress, failed *vchannelProgress) error {
	var full, partial []string
	for _, vp := range progress {
		switch {
		case vp.Acked == vp.Rows:
			full = append(full, vp.VChannel)
		case vp.Stopped:
			partial = append(partial, fmt.Sprintf("%s (%d of %d rows; stopped after the first failure)", vp.VChannel, vp.Acked, vp.Rows))
		default:
			partial = append(partial, fmt.Sprintf("%s (%d of %d rows; failed)", vp.VChannel, vp.Acked, vp.Rows))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "vchannel %s: %s; ", failed.VChannel, errorMessage(failed.Err))
	if res.Acknowledged == 0 {
		fmt.Fprintf(&b, "none of the %d rows (primary keys %d..%d) was acknowledged", res.Count, res.FirstPK, res.LastPK)
	} else {
		fmt.Fprintf(&b, "partly written: %d of %d rows (primary keys %d..%d, dealt round-robin over %d vchannels) acknowledged",
			res.Acknowledged, res.Count, res.FirstPK, res.LastPK, res.VChannels)
		if len(full) > 0 {
			fmt.Fprintf(&b, ", vchannels %s in full", strings.Join(full, ", "))
		}
	}
	fmt.Fprintf(&b, "; not acknowledged: %s. Unacknowledged rows may or may not be in the WAL; running the insert again writes all %d rows again under new primary keys (docs/semantics.md#insert-waits)",
		strings.Join(partial, "; "), res.Count)
	var ce *Error
	code, stopped := status.Code(failed.Err), error(nil)
	if errors.As(failed.Err, &ce) {
		stopped = ce.Stopped
	}
	return &Error{Op: "Insert", Err: status.Error(code, b.String()), Stopped: stopped}
}

// errorMessage is err's text without the client's wrapping.
func errorMessage(err error) string {
	var ce *Error
	if errors.As(err, &ce) {
		return status.Convert(ce.Err).Message()
	}
	return err.Error()
}

// producer sends insert messages for Insert's VChannel senders.
type producer struct {
	c     *Client
	start time.Time // when Insert was called

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
// the owner up again after an answer that says it moved. One attempt is
// bounded by Config.AttemptTimeout, so an owner that accepted the
// connection but stopped answering (a paused process) leaves time to look
// again; a retried message is written once (its dedup ID).
func (p *producer) send(ctx context.Context, req *coordpb.InsertRequest) error {
	pch := vocab.PChannelOf(req.Vchannel)
	var last error // why the last attempt did not deliver it, explained
	giveUp := func(stopped error) error {
		// The wait explains itself: which PChannel, whose, in what state,
		// what coordd does next, and since when: the start of the Insert
		// call, which is how long the caller has waited
		// (docs/semantics.md#insert-waits).
		return &Error{Op: "Insert", Stopped: stopped, Err: status.Errorf(codes.Unavailable, "%v; waited from %s, gave up after %v (%v)",
			last, p.start.Format("15:04:05.000"), time.Since(p.start).Round(time.Millisecond), stopped)}
	}
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, min(time.Duration(attempt)*100*time.Millisecond, time.Second)); err != nil {
				return giveUp(err)
			}
		}
		pc, epoch, err := p.owner(ctx, pch, attempt > 0)
		if err != nil {
			if last != nil && ctx.Err() != nil {
				return giveUp(ctx.Err()) // the deadline came during the look-up: the last reason stands
			}
			return err
		}
		if pc == nil || pc.NodeAddress == "" || pc.State != "ASSIGNED" || epoch == 0 {
			// No owner, a move in flight, or an owner that is not a live
			// node (it died and the PChannel has not moved yet): wait.
			last = p.waitReason(pch, pc, nil)
			continue
		}
		cc, err := p.conn(pc.NodeAddress)
		if err != nil {
			return &Error{Op: "Insert", Err: err}
		}
		req.Term, req.NodeId, req.Epoch = pc.Term, pc.NodeId, epoch
		actx, cancel := ctx, context.CancelFunc(func() {})
		if p.c.cfg.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, p.c.cfg.AttemptTimeout)
		}
		_, err = coordpb.NewStreamingNodeServiceClient(cc).Insert(actx, req)
		cancel()
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.DataLoss,
			codes.Unauthenticated, codes.PermissionDenied: // a secure node wants a proxy certificate (Config.TLS)
			return &Error{Op: "Insert", Err: err}
		}
		// Not the owner any more, a newer term, unavailable, no answer in
		// time: say why, and look again while the deadline allows.
		last = p.waitReason(pch, pc, err)
		if ctx.Err() != nil {
			return giveUp(ctx.Err())
		}
	}
}

// waitReason says why an insert into pch cannot be delivered now
// (explainWait, from the producer's last look at the assignments). cause
// is the owner's own answer, if it was reached.
func (p *producer) waitReason(pch string, pc *coordpb.PChannel, cause error) error {
	p.mu.Lock()
	var n *coordpb.StreamingNode
	if pc != nil {
		n = p.nodes[pc.NodeId]
	}
	nodes := make([]*coordpb.StreamingNode, 0, len(p.nodes))
	for _, x := range p.nodes {
		nodes = append(nodes, x)
	}
	seenAt := p.seenAt
	p.mu.Unlock()
	return explainWait(pch, pc, n, nodes, cause, seenAt)
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
