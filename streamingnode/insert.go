package streamingnode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/dml"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// The DML write path (docs/semantics.md#flusher): an
// insert gets room in a growing segment from coordd, then one WAL message
// that names the segment. The allocation is used at once and only if the
// message's time tick is below its expiry and the local clock is at least
// allocationMargin before it, so no row reaches a segment after coordd
// considers its allocations expired.

// allocationMargin is how long before an allocation's expiry (by the local
// clock) the write path stops using it: room for the append itself and
// for clock skew between this node and coordd's leader.
const allocationMargin = 500 * time.Millisecond

// rowBytes is the size the write path declares per row (primary key and
// timestamp).
const rowBytes = 16

// payloadPool reuses the buffers insert messages are encoded into: the WAL
// copies a payload into its own record buffer during Append and keeps no
// reference, so the buffer is free again when Append returns. Buffers
// above maxPooledPayload are left to the garbage collector.
var payloadPool = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledPayload = 1 << 20

// Insert writes rows to a VChannel this node owns: a segment allocation
// from coordd, then one WAL message naming the segment. On a secure node
// only a writer's certificate may call it (requireWriter).
func (s *service) Insert(ctx context.Context, req *coordpb.InsertRequest) (*coordpb.InsertResponse, error) {
	n := s.n
	if err := n.requireWriter(ctx, "Insert"); err != nil {
		return nil, err
	}
	coll, ok := vocab.CollectionOfVChannel(req.Vchannel)
	switch {
	case !ok:
		return nil, invalid("vchannel %q is not a VChannel name (<pchannel>_<collection>v<shard>)", req.Vchannel)
	case req.CollectionId <= 0:
		return nil, invalid("collection id must be positive, got %d", req.CollectionId)
	case coll != req.CollectionId:
		return nil, invalid("vchannel %s belongs to collection %d, not %d", req.Vchannel, coll, req.CollectionId)
	case req.PartitionId < 0:
		return nil, invalid("partition id must not be negative, got %d", req.PartitionId)
	case len(req.Pks) == 0 || len(req.Pks) > dml.MaxRows:
		return nil, invalid("an insert needs 1..%d primary keys, got %d", dml.MaxRows, len(req.Pks))
	}
	if err := n.checkIdentity(req.NodeId, req.Epoch); err != nil {
		return nil, err
	}
	p := vocab.PChannelOf(req.Vchannel)
	sl := n.slotFor(p, false)
	if sl == nil {
		return nil, n.notOwner(p)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.w == nil:
		return nil, n.notOwner(p)
	case req.Term != 0 && req.Term != sl.term:
		return nil, precondition("wrong term: pchannel %s is held here at term %d, the request names term %d", p, sl.term, req.Term)
	case sl.mode == "RO":
		return nil, precondition("read-only: pchannel %s is held here in RO mode at term %d", p, sl.term)
	}
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	nodeID, _ := n.Session()
	if nodeID == 0 {
		return nil, status.Error(codes.Unavailable, "not registered with coordd yet")
	}
	dc, err := n.dataClient()
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "%v", err)
	}
	for attempt := 0; ; attempt++ {
		asg, err := dc.AssignSegmentID(ctx, nodeID, []*coordpb.SegmentIDRequest{{CollectionId: req.CollectionId,
			PartitionId: req.PartitionId, Vchannel: req.Vchannel, PchannelTerm: sl.term,
			Rows: uint64(len(req.Pks)), Bytes: uint64(rowBytes * len(req.Pks))}})
		if err != nil {
			return nil, passStatus(err, "assign segment")
		}
		if len(asg) != 1 || asg[0].SegmentId <= 0 {
			return nil, status.Errorf(codes.Internal, "coordd answered AssignSegmentID without a segment")
		}
		a := asg[0]
		// A fresh timestamp: above the allocation (and any seal coordd
		// committed before it), not one from a batch taken earlier.
		n.tso.Discard()
		ts, err := n.tso.Next(ctx)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "%v", err)
		}
		if ts >= a.ExpireTs || time.Now().Add(allocationMargin).UnixMilli() >= a.ExpireUnixMs {
			if attempt < 3 {
				continue // too late for this allocation: ask again
			}
			return nil, status.Errorf(codes.Unavailable, "segment allocations expire before they can be used (expire ts %d, message ts %d)", a.ExpireTs, ts)
		}
		res, err := appendInsert(sl.w, req, a.SegmentId, ts)
		var te *wal.TimestampError
		switch {
		case err == nil:
			seg := a.SegmentId
			if res.Duplicate {
				seg = 0
			}
			return &coordpb.InsertResponse{Id: &coordpb.MessageID{Term: res.ID.Term, Offset: res.ID.Offset},
				Timestamp: res.Timestamp, SegmentId: seg, Duplicate: res.Duplicate}, nil
		case errors.As(err, &te) && attempt < 3:
			continue // an earlier owner wrote later timestamps: a fresh one is above them
		case errors.Is(err, wal.ErrFenced):
			n.log.Warn("WAL fenced by a newer term; dropping it", "pchannel", p, "term", sl.term, "error", err)
			sl.close()
			return nil, precondition("%v", err)
		case errors.Is(err, wal.ErrInvalid):
			return nil, invalid("%v", err)
		case errors.As(err, new(badInsert)):
			return nil, invalid("%v", err)
		default:
			term := sl.term
			n.log.Error("WAL append failed; dropping the WAL and reporting it", "pchannel", p, "term", term, "error", err)
			sl.close()
			go n.reportBroken(p, term, err)
			return nil, status.Errorf(codes.Unavailable, "wal failure on pchannel %s (the insert may or may not be in the log): %v", p, err)
		}
	}
}

// badInsert: the insert cannot be encoded as one WAL message (nothing was
// appended; the WAL is fine).
type badInsert string

func (e badInsert) Error() string { return string(e) }

// appendInsert encodes the insert message into a pooled buffer and
// appends it.
func appendInsert(w *wal.Writer, req *coordpb.InsertRequest, segment int64, ts uint64) (wal.AppendResult, error) {
	bp := payloadPool.Get().(*[]byte)
	payload, err := dml.AppendInsert((*bp)[:0], &dml.Insert{Collection: req.CollectionId, Partition: req.PartitionId, Segment: segment, PKs: req.Pks})
	if err != nil {
		payloadPool.Put(bp)
		return wal.AppendResult{}, badInsert(err.Error())
	}
	defer func() {
		if cap(payload) <= maxPooledPayload {
			*bp = payload[:0]
			payloadPool.Put(bp)
		}
	}()
	if len(payload) > wal.MaxPayloadBytes {
		return wal.AppendResult{}, badInsert(fmt.Sprintf("insert is %d bytes encoded (max %d): send fewer rows", len(payload), wal.MaxPayloadBytes))
	}
	return w.Append(req.Vchannel, payload, req.DedupId, ts)
}

// passStatus returns a coordd error to the caller with its code and some
// context.
func passStatus(err error, what string) error {
	if s, ok := status.FromError(err); ok {
		return status.Errorf(s.Code(), "%s: %s", what, s.Message())
	}
	return status.Errorf(codes.Unavailable, "%s: %v", what, err)
}
