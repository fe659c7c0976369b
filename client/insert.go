package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
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
				if !commands.IsCChannel(v) {
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
		owners, epochs := map[string]*coordpb.PChannel{}, map[uint64]uint64{}
		for _, pc := range resp.Pchannels {
			owners[pc.Name] = pc
		}
		for _, n := range nodes {
			epochs[n.Id] = n.Epoch
		}
		p.mu.Lock()
		p.owners, p.epochs = owners, epochs
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
	pch := commands.PChannelOf(req.Vchannel)
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := sleep(ctx, min(time.Duration(attempt)*100*time.Millisecond, time.Second)); err != nil {
				return &Error{Op: "Insert", Err: fmt.Errorf("%w (last error: %v)", err, last)}
			}
		}
		pc, epoch, err := p.owner(ctx, pch, attempt > 0)
		if err != nil {
			return err
		}
		if pc == nil || pc.NodeAddress == "" || pc.State != "ASSIGNED" {
			last = fmt.Errorf("pchannel %s has no assigned streaming node", pch)
			continue
		}
		if epoch == 0 {
			// The owner is not a live node (it died and the PChannel has
			// not moved yet): wait for the move.
			last = fmt.Errorf("pchannel %s is assigned to streaming node %d, which is not live", pch, pc.NodeId)
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
		case codes.InvalidArgument, codes.NotFound, codes.Unimplemented, codes.DataLoss:
			return &Error{Op: "Insert", Err: err}
		}
		if ctx.Err() != nil {
			return &Error{Op: "Insert", Err: fmt.Errorf("%w (last error: %v)", ctx.Err(), err)}
		}
		last = err // not the owner any more, a newer term, unavailable: look again
	}
}
