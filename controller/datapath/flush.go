package datapath

import (
	"context"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// FlushResult answers Flush.
type FlushResult struct {
	// Checkpoints are the collection's VChannel checkpoints, read before
	// the seal, and At the time they were read (for their lag).
	Checkpoints []*fsm.ChannelCheckpoint
	At          time.Time
	FlushTs     uint64
	// Sealed are the collection's Sealed or Flushing segments after the
	// seal, Flushed its Flushed segments other than L0.
	Sealed, Flushed []int64
}

// Flush seals every growing segment of a collection at a fresh TSO
// timestamp in one command (docs/semantics.md#flush): a linearizable read
// finds the collection and its checkpoints, then the flush manager seals.
func (s *Service) Flush(ctx context.Context, f FlushRequest) (FlushResult, error) {
	collection := f.collection
	st, err := s.l.LinearizableRead(ctx)
	if err != nil {
		return FlushResult{}, err
	}
	coll, ok := st.Collection(collection)
	if !ok {
		return FlushResult{}, vocab.Errorf(ErrNotFound, "collection %d has no vchannels", collection)
	}
	out := FlushResult{At: s.clock.Now()}
	for _, v := range coll.Vchannels {
		if cp, ok := st.ChannelCheckpoint(v); ok {
			out.Checkpoints = append(out.Checkpoints, cp)
		}
	}
	if out.FlushTs, err = s.tso.Alloc(ctx, 1); err != nil {
		return FlushResult{}, err
	}
	if _, err := s.flush.SealCollection(ctx, collection, out.FlushTs); err != nil {
		return FlushResult{}, err
	}
	for _, g := range s.l.State().SegmentsOfCollection(collection) {
		switch {
		case g.State == logpb.SegmentState_SEGMENT_SEALED || g.State == logpb.SegmentState_SEGMENT_FLUSHING:
			out.Sealed = append(out.Sealed, g.ID)
		case g.State == logpb.SegmentState_SEGMENT_FLUSHED && g.Level != logpb.SegmentLevel_LEVEL_L0:
			out.Flushed = append(out.Flushed, g.ID)
		}
	}
	return out, nil
}

// FlushAllResult answers FlushAll: where the FlushAll message landed on
// every PChannel, as its callback recorded it.
type FlushAllResult struct {
	BroadcastID uint64
	ClusterID   string
	CChannel    string
	Ticks       []*logpb.PChannelTimeTick
}

// FlushAll broadcasts a FlushAll message to every PChannel under the
// exclusive Cluster key and answers what its callback recorded. The
// recorded broadcast must be this call's: a newer FlushAll may have
// replaced it, or the callback has not run yet, and then the answer would
// be another call's positions.
func (s *Service) FlushAll(ctx context.Context) (FlushAllResult, error) {
	if s.broadcasts == nil {
		return FlushAllResult{}, ErrNoBroadcaster
	}
	b, err := broadcaster.Check(broadcaster.Request{
		MessageType:  vocab.MsgFlushAll,
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_CLUSTER}},
	})
	if err != nil {
		return FlushAllResult{}, err
	}
	res, err := s.broadcasts.Broadcast(ctx, b)
	if err != nil {
		return FlushAllResult{}, err
	}
	st := s.l.State()
	id, ticks := st.FlushAllTicks()
	if id != res.BroadcastID {
		return FlushAllResult{}, vocab.Errorf(ErrPrecondition, "FlushAll broadcast %d completed but its callback has not recorded it (see coordctl broadcast get %d)",
			res.BroadcastID, res.BroadcastID)
	}
	return FlushAllResult{BroadcastID: id, ClusterID: st.ChannelsMeta().ClusterId, CChannel: st.CChannel(), Ticks: ticks}, nil
}
