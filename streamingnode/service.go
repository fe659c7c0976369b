package streamingnode

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/dml"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// service implements coordpb.StreamingNodeServiceServer.
type service struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	n *Node
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

func precondition(format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, format, args...)
}

func validPChannel(p string) error {
	if err := vocab.ValidatePChannelName(p); err != nil {
		return invalid("%s", err)
	}
	return wal.ValidatePChannel(p)
}

// Assign opens the WAL of a PChannel at a term on this node, as coordd's
// balancer orders (docs/architecture.md#the-streaming-node). The request must
// name this node's session (node ID, epoch) and a coordinator term no older
// than the newest confirmed one; a PChannel term below the one held here, or
// one this node was already told to remove, is refused (FailedPrecondition);
// a coordinator or PChannel term coordd has not confirmed (heartbeat answers,
// the assignment view) is refused with Unavailable
// (docs/semantics.md#streaming-node-trust). The same term again only updates
// the access mode. On a secure node only coordd's server identity may call
// it (requireCoordinator).
func (s *service) Assign(ctx context.Context, req *coordpb.AssignRequest) (*coordpb.AssignResponse, error) {
	n := s.n
	if err := n.requireCoordinator(ctx, "Assign"); err != nil {
		return nil, err
	}
	if err := validPChannel(req.Pchannel); err != nil {
		return nil, err
	}
	if req.Term < 1 {
		return nil, invalid("term must be positive, got %d", req.Term)
	}
	mode := req.AccessMode
	switch mode {
	case "":
		mode = "RW"
	case "RW", "RO":
	default:
		return nil, invalid("access_mode %q: want RW or RO", req.AccessMode)
	}
	if err := n.checkIdentity(req.NodeId, req.Epoch); err != nil {
		return nil, err
	}
	if err := n.confirmCoordTerm(ctx, req.CoordTerm); err != nil {
		return nil, err
	}
	if err := n.confirmAssign(ctx, req.Pchannel, req.Term); err != nil {
		return nil, err
	}
	sl := n.slotFor(req.Pchannel, true)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	// A newer coordinator may have spoken while this call waited for the
	// slot.
	if err := n.checkCoordTerm(req.CoordTerm); err != nil {
		return nil, err
	}
	if req.Term <= sl.removedUpTo {
		// Milvus orders lifecycle requests by term: an Assign that arrives
		// after the Remove of its term is a skipped operation.
		return nil, precondition("stale pchannel term: pchannel %s was removed on this node up to term %d, the request carries term %d",
			req.Pchannel, sl.removedUpTo, req.Term)
	}
	if sl.w != nil {
		switch {
		case req.Term < sl.term:
			return nil, precondition("stale pchannel term: pchannel %s is held here at term %d, the request carries term %d",
				req.Pchannel, sl.term, req.Term)
		case req.Term == sl.term:
			sl.mode = mode
			return &coordpb.AssignResponse{}, nil
		}
		n.log.Info("closing WAL for a newer term", "pchannel", req.Pchannel, "term", sl.term, "new_term", req.Term)
		sl.close()
	}
	w, err := wal.Open(n.cfg.WALDir, req.Pchannel, req.Term)
	if err != nil {
		return nil, walStatus(err)
	}
	if n.cfg.UnsafeNoFence {
		w.UnsafeSkipFence()
	}
	sl.w, sl.term, sl.mode = w, req.Term, mode
	n.log.Info("WAL opened", "pchannel", req.Pchannel, "term", req.Term, "mode", mode, "next_offset", w.NextOffset(),
		"coord_term", req.CoordTerm)
	return &coordpb.AssignResponse{}, nil
}

// Remove closes the WAL of a PChannel if it is held here at the given term
// or an older one (a newer term is left alone) and remembers the term, so a
// late Assign for it is refused. Identity and coordinator-term checks are
// those of Assign (docs/architecture.md#fencing); the term must be below
// the one coordd's assignment view holds (confirmRemove). On a secure node
// only coordd's server identity may call it, like Assign
// (docs/security.md#the-streaming-nodes-port).
func (s *service) Remove(ctx context.Context, req *coordpb.RemoveRequest) (*coordpb.RemoveResponse, error) {
	n := s.n
	if err := n.requireCoordinator(ctx, "Remove"); err != nil {
		return nil, err
	}
	if err := validPChannel(req.Pchannel); err != nil {
		return nil, err
	}
	if req.Term < 1 {
		return nil, invalid("term must be positive, got %d", req.Term)
	}
	if err := n.checkIdentity(req.NodeId, req.Epoch); err != nil {
		return nil, err
	}
	if err := n.confirmCoordTerm(ctx, req.CoordTerm); err != nil {
		return nil, err
	}
	if n.cfg.UnsafeAcceptAnyRemove {
		n.log.Warn("TEST ONLY: accepting a Remove coordd may not have decided", "pchannel", req.Pchannel, "term", req.Term)
	} else if err := n.confirmRemove(ctx, req.Pchannel, req.Term); err != nil {
		return nil, err
	}
	sl := n.slotFor(req.Pchannel, true)
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if err := n.checkCoordTerm(req.CoordTerm); err != nil {
		return nil, err
	}
	if n.cfg.UnsafeNoFence {
		n.log.Warn("TEST ONLY: ignoring Remove", "pchannel", req.Pchannel, "term", req.Term)
		return &coordpb.RemoveResponse{}, nil
	}
	sl.removedUpTo = max(sl.removedUpTo, req.Term)
	switch {
	case sl.w == nil:
	case sl.term <= req.Term:
		n.log.Info("WAL removed", "pchannel", req.Pchannel, "term", sl.term, "coord_term", req.CoordTerm)
		sl.close()
	default:
		// Held at a newer term than the one being removed: nothing to do
		// (Milvus answers "skipped operation", which counts as success).
		n.log.Debug("remove of an older term skipped", "pchannel", req.Pchannel, "term", req.Term, "held_term", sl.term)
	}
	return &coordpb.RemoveResponse{}, nil
}

// walStatus maps WAL errors to gRPC status.
func walStatus(err error) error {
	switch {
	case errors.Is(err, wal.ErrFenced):
		return precondition("%v", err)
	case errors.Is(err, wal.ErrInvalid):
		return invalid("%v", err)
	case errors.Is(err, wal.ErrCorrupt):
		return status.Errorf(codes.DataLoss, "%v", err)
	}
	return status.Errorf(codes.Internal, "%v", err)
}

// Append writes one message to the WAL of the VChannel's PChannel, which this
// node must hold RW (at the named term, if any) for the named session.
// Broadcast appends (non-zero broadcast ID) carry the coordinator term,
// fenced like Assign, and are idempotent per (broadcast ID, VChannel) among
// broadcast records; with ack_sync_up the node acks them to coordd once
// persisted. A broadcast ID without a coordinator term is InvalidArgument:
// a broadcast's record is coordd's alone, so no writer can take its key
// (an Insert's dedup ID lives in a key space of its own, wal/dedup.go). FailedPrecondition
// when this node is not the owner, the term is wrong, or a newer term fenced
// the WAL; a request its caller gave up on while waiting is not written.
// On a secure node a client Append needs a writer's certificate
// (requireWriter), a coordinator one coordd's server identity.
func (s *service) Append(ctx context.Context, req *coordpb.AppendRequest) (*coordpb.AppendResponse, error) {
	return s.n.appendOne(ctx, req)
}

// appendOne is Append: every check and the write of one message. An
// AppendBatch item runs through it unchanged, so a batched append is
// admitted, fenced and deduplicated exactly like a single one
// (append_batch.go).
func (n *Node) appendOne(ctx context.Context, req *coordpb.AppendRequest) (*coordpb.AppendResponse, error) {
	if err := vocab.ValidateBroadcastTarget(req.Vchannel); err != nil {
		return nil, invalid("%s", err)
	}
	if len(req.Payload) > wal.MaxPayloadBytes {
		return nil, invalid("payload is %d bytes (max %d)", len(req.Payload), wal.MaxPayloadBytes)
	}
	if dml.IsDML(req.Payload) {
		return nil, invalid("the payload starts like a DML message: rows are written with Insert, which assigns them a segment")
	}
	if req.BroadcastId != 0 && req.CoordTerm == 0 {
		return nil, invalid("broadcast_id %d without coord_term: a broadcast's record is written only by coordd's broadcaster, "+
			"which sends its term; an idempotent write of rows is Insert with dedup_id", req.BroadcastId)
	}
	if req.CoordTerm != 0 || req.AckSyncUp {
		// A coordinator's broadcast append (fenced by its term, acked to
		// coordd by this node on its behalf) is coordd's call.
		if err := n.requireCoordinator(ctx, "a coordinator Append (coord_term or ack_sync_up set)"); err != nil {
			return nil, err
		}
	} else if err := n.requireWriter(ctx, "Append"); err != nil {
		return nil, err
	}
	if err := n.checkIdentity(req.NodeId, req.Epoch); err != nil {
		return nil, err
	}
	if req.CoordTerm != 0 {
		// A coordinator's broadcast append is fenced like Assign/Remove.
		if err := n.confirmCoordTerm(ctx, req.CoordTerm); err != nil {
			return nil, err
		}
	}
	p := vocab.PChannelOf(req.Vchannel)
	sl := n.slotFor(p, false)
	if sl == nil {
		return nil, n.notOwner(p)
	}
	if testHookAppendWaitsForSlot != nil {
		testHookAppendWaitsForSlot(req)
	}
	sl.mu.Lock()
	defer sl.mu.Unlock()
	// A request its caller gave up on while it waited for the slot is not
	// written: the caller (e.g. the broadcaster, after an operator's
	// Abandon) may already have released its locks, and a later message
	// may already be in this WAL.
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	if req.CoordTerm != 0 {
		if err := n.checkCoordTerm(req.CoordTerm); err != nil {
			return nil, err
		}
	}
	switch {
	case sl.w == nil:
		return nil, n.notOwner(p)
	case req.Term != 0 && req.Term != sl.term:
		return nil, precondition("wrong term: pchannel %s is held here at term %d, the request names term %d", p, sl.term, req.Term)
	case sl.mode == "RO":
		return nil, precondition("read-only: pchannel %s is held here in RO mode at term %d", p, sl.term)
	}
	for attempt := 0; ; attempt++ {
		ts, err := n.tso.Next(ctx)
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "%v", err)
		}
		if err := ctx.Err(); err != nil { // given up while a timestamp was fetched
			return nil, status.FromContextError(err).Err()
		}
		res, moved, err := appendOutsideSlot(sl, req.Vchannel, req.Payload, req.BroadcastId, ts)
		var te *wal.TimestampError
		switch {
		case moved && err != nil:
			// The slot dropped or replaced this writer while the record
			// was being written; that writer's failure is not this one's.
			return nil, status.Errorf(codes.Unavailable, "pchannel %s changed hands while the append was written (it is not in the log): %v", p, err)
		case err == nil:
			if req.AckSyncUp && req.BroadcastId != 0 {
				// The message is persisted (fsync'd): ack it to the
				// coordinator, which waits for node acks on such tasks.
				go n.ackBroadcast(req.BroadcastId, &coordpb.Checkpoint{Vchannel: req.Vchannel,
					Term: res.ID.Term, Offset: res.ID.Offset, TimeTick: res.Timestamp})
			}
			return &coordpb.AppendResponse{Id: &coordpb.MessageID{Term: res.ID.Term, Offset: res.ID.Offset},
				Timestamp: res.Timestamp, Duplicate: res.Duplicate}, nil
		case errors.As(err, &te) && attempt < 3:
			// Another writer (an earlier owner) used later timestamps than our
			// batch: take a fresh batch, which is above everything issued.
			n.tso.Discard()
			continue
		case errors.Is(err, wal.ErrFenced):
			n.log.Warn("WAL fenced by a newer term; dropping it", "pchannel", p, "term", sl.term, "error", err)
			sl.close()
			return nil, precondition("%v", err)
		case errors.Is(err, wal.ErrInvalid):
			return nil, invalid("%v", err)
		default:
			term := sl.term
			n.log.Error("WAL append failed; dropping the WAL and reporting it", "pchannel", p, "term", term, "error", err)
			sl.close()
			go n.reportBroken(p, term, err)
			return nil, status.Errorf(codes.Unavailable, "wal failure on pchannel %s (the append may or may not be in the log): %v", p, err)
		}
	}
}

// appendOutsideSlot appends with sl.mu held only while the timestamp's
// order is fixed: the record is enqueued under it (so timestamps increase
// along the log) and the slot is let go while the record is written, so
// concurrent appends to one PChannel share one fdatasync (the WAL's group
// commit). sl.mu is held again on return; moved reports that the slot no
// longer holds the writer the record was given to.
func appendOutsideSlot(sl *slot, vchannel string, payload []byte, broadcastID, ts uint64) (res wal.AppendResult, moved bool, err error) {
	w := sl.w
	pend, err := w.Enqueue(vchannel, payload, broadcastID, ts)
	if err != nil {
		return res, false, err
	}
	sl.mu.Unlock()
	res, err = pend.Wait()
	sl.mu.Lock()
	return res, sl.w != w, err
}

// testHookAppendWaitsForSlot, when set (tests only), runs just before an
// Append waits for its slot.
var testHookAppendWaitsForSlot func(*coordpb.AppendRequest)

func (n *Node) notOwner(p string) error {
	id, _ := n.Session()
	return precondition("not the owner: streaming node %d (%s) does not hold pchannel %s", id, n.addr, p)
}

// ackBroadcast acks a persisted broadcast message to coordd in this node's
// session, retrying across endpoints until it is recorded, refused, or the
// node stops (the coordinator treats repeats as no-ops, so retrying is
// always safe). coordd refuses an ack once the channel has moved on to
// another owner; that is final (the broadcaster re-appends to the new
// owner, which acks the record it finds).
func (n *Node) ackBroadcast(id uint64, cp *coordpb.Checkpoint) {
	for attempt := 0; n.bgCtx.Err() == nil; attempt++ {
		i, conn := n.pool.pick()
		node, epoch := n.Session()
		cctx, cancel := context.WithTimeout(n.bgCtx, n.cfg.RPCTimeout)
		_, err := coordpb.NewBroadcasterClient(conn).Ack(cctx, &coordpb.AckRequest{BroadcastId: id,
			Checkpoints: []*coordpb.Checkpoint{cp}, NodeId: node, Epoch: epoch})
		cancel()
		if err == nil {
			return
		}
		switch status.Code(err) {
		case codes.InvalidArgument, codes.FailedPrecondition, codes.Aborted, codes.NotFound:
			n.log.Warn("broadcast ack refused; not retrying", "broadcast", id, "vchannel", cp.Vchannel, "term", cp.Term, "error", err)
			return
		}
		if endpointTrouble(err) {
			n.pool.failed(i)
		}
		sleepCtx(n.bgCtx, min(time.Duration(attempt+1)*50*time.Millisecond, 2*time.Second))
	}
}

// reportBroken tells coordd the WAL of pchannel is unusable at term, so the
// channel is reassigned.
func (n *Node) reportBroken(p string, term int64, cause error) {
	ctx, cancel := context.WithTimeout(n.bgCtx, 4*n.cfg.RPCTimeout)
	defer cancel()
	for ctx.Err() == nil {
		i, conn := n.pool.pick()
		cctx, ccancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
		_, err := coordpb.NewChannelsClient(conn).ReportAssignmentError(cctx, &coordpb.ReportAssignmentErrorRequest{
			Pchannel: p, Term: term, Error: cause.Error()})
		ccancel()
		if err == nil || !endpointTrouble(err) {
			return
		}
		n.pool.failed(i)
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

// Read streams a VChannel's messages from an offset of its PChannel's WAL,
// held here or not; with follow it keeps waiting for new messages until the
// caller leaves or the node shuts down (Unavailable).
func (s *service) Read(req *coordpb.ReadRequest, stream grpc.ServerStreamingServer[coordpb.WALMessage]) error {
	n := s.n
	if err := n.requireReader(stream.Context()); err != nil {
		return err
	}
	if err := vocab.ValidateBroadcastTarget(req.Vchannel); err != nil {
		return invalid("%s", err)
	}
	p := vocab.PChannelOf(req.Vchannel)
	r, err := wal.NewReader(n.cfg.WALDir, p, wal.ReaderOptions{VChannel: req.Vchannel, From: req.FromOffset, Follow: req.Follow})
	if err != nil {
		return walStatus(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(n.bgCtx, cancel)
	defer stop()
	for {
		rec, err := r.Next(ctx)
		switch {
		case err == io.EOF:
			return nil
		case err != nil && ctx.Err() != nil:
			if n.bgCtx.Err() != nil {
				return status.Error(codes.Unavailable, "streaming node shutting down")
			}
			return status.FromContextError(ctx.Err()).Err()
		case err != nil:
			return walStatus(err)
		}
		if err := stream.Send(&coordpb.WALMessage{Id: &coordpb.MessageID{Term: rec.ID.Term, Offset: rec.ID.Offset},
			Timestamp: rec.Timestamp, Vchannel: rec.VChannel, Payload: rec.Payload, BroadcastId: rec.BroadcastID}); err != nil {
			return err
		}
	}
}

// Status describes this node: its session, the highest coordinator term it
// has confirmed and the WALs it holds.
func (s *service) Status(context.Context, *coordpb.NodeStatusRequest) (*coordpb.NodeStatusResponse, error) {
	return s.n.Status(), nil
}
