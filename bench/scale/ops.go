package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// The operations of Milvus's coordination load (docs/scaling.md#milvus-max),
// each one call as a Milvus component would make it. Each returns the
// values it carried (checkpoints) and its error.

// collectionOf is the collection ID in a VChannel name
// (<pchannel>_<collection>v<shard>).
func collectionOf(vch string) int64 {
	rest := strings.TrimPrefix(vch, vocab.PChannelOf(vch)+"_")
	if i := strings.IndexByte(rest, 'v'); i > 0 {
		rest = rest[:i]
	}
	id, _ := strconv.ParseInt(rest, 10, 64)
	return id
}

// checkpointOp: one flusher's UpdateChannelCheckpoints of up to 128
// VChannels its node owns (Milvus sends them in batches of 128 every
// 10 s), each advanced to a fresh position. Node k takes calls k, k+N, ...
// and walks its VChannels in windows, so every VChannel is checkpointed in
// turn.
func (e *env) checkpointOp(i int) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		v := e.owners.Load()
		if v == nil || len(v.nodes) == 0 {
			return 0, fmt.Errorf("no owners known")
		}
		k := i % len(v.nodes)
		node := v.nodes[k]
		vchs := v.byNode[node]
		size := min(128, len(vchs))
		start := int(v.cursor[k].Add(int64(size))-int64(size)) % len(vchs)
		t := nextPosition()
		req := &coordpb.UpdateChannelCheckpointsRequest{NodeId: node}
		for j := range size {
			vch := vchs[(start+j)%len(vchs)]
			o := v.byPChannel[vocab.PChannelOf(vch)]
			req.Checkpoints = append(req.Checkpoints, &coordpb.ChannelCheckpoint{Vchannel: vch, PchannelTerm: o.term,
				Position: &coordpb.Position{Term: o.term, Offset: t >> 10, Timestamp: t}})
		}
		resp, err := coordpb.NewDataCoordClient(e.leaderConn()).UpdateChannelCheckpoints(ctx, req)
		if err == nil && len(resp.Refused) > 0 {
			err = fmt.Errorf("%d of %d checkpoints refused: %s", len(resp.Refused), size, resp.Refused[0])
		}
		e.refused(ctx, err)
		if err != nil {
			return 0, err
		}
		return int(resp.Accepted), nil
	}
}

// slot is one VChannel of the flush path's working set: its current
// growing segment, and a segment sealed by a seal call that the next save
// finishes (SaveBinlogPaths with flushed=true) before moving on.
type slot struct {
	mu     sync.Mutex
	vch    string
	coll   int64
	seg    int64
	sealed int64
	rows   int64
}

// flushPath is the working set of the SaveBinlogPaths and seal load.
type flushPath struct {
	slots []*slot
	next  atomic.Int64
	colls []int64 // the working set's collections (seal targets)
}

// newFlushPath picks n VChannels, each of a collection of its own, on
// PChannels the load spreads over.
func newFlushPath(e *env, n, skipColls int) *flushPath {
	f := &flushPath{}
	seen := map[int64]bool{}
	skipped := 0
	for pass := 0; len(f.slots) < n && pass < 64; pass++ {
		for _, pc := range sortedKeys(e.seed.ByPChannel) {
			l := e.seed.ByPChannel[pc]
			if pass >= len(l) || len(f.slots) >= n {
				continue
			}
			vch := l[pass]
			c := collectionOf(vch)
			if seen[c] {
				continue
			}
			seen[c] = true
			if skipped < skipColls {
				skipped++
				continue
			}
			f.slots = append(f.slots, &slot{vch: vch, coll: c})
			f.colls = append(f.colls, c)
		}
	}
	return f
}

// assign gets the slot a growing segment (AssignSegmentID as the owner).
func (e *env) assign(ctx context.Context, s *slot, st *opStats) error {
	o, ok := e.ownerOf(s.vch)
	if !ok {
		return fmt.Errorf("no owner for %s", s.vch)
	}
	t0 := time.Now()
	resp, err := coordpb.NewDataCoordClient(e.leaderConn()).AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: o.node,
		Requests: []*coordpb.SegmentIDRequest{{CollectionId: s.coll, PartitionId: s.coll + 1, Vchannel: s.vch, PchannelTerm: o.term, Rows: 1, Bytes: 1024}}})
	e.refused(ctx, err)
	if err != nil {
		st.fail(err)
		return err
	}
	st.ok(time.Since(t0), 1)
	s.seg, s.rows = resp.Assignments[0].SegmentId, 0
	return nil
}

// saveOp: the flusher's SaveBinlogPaths of one segment: a new insert
// binlog of one field and the segment's new DML position; a segment a seal
// call sealed is first saved as flushed.
func (e *env) saveOp(f *flushPath, assignSt *opStats) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		s := f.slots[int(f.next.Add(1))%len(f.slots)]
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.seg == 0 {
			if err := e.assign(ctx, s, assignSt); err != nil {
				return 0, fmt.Errorf("assign a segment: %w", err)
			}
		}
		o, ok := e.ownerOf(s.vch)
		if !ok {
			return 0, fmt.Errorf("no owner for %s", s.vch)
		}
		seg, flushed := s.seg, false
		if s.sealed != 0 {
			seg, flushed = s.sealed, true
		}
		t := nextPosition()
		s.rows += 100
		pos := &coordpb.Position{Term: o.term, Offset: t >> 10, Timestamp: t}
		resp, err := coordpb.NewDataCoordClient(e.leaderConn()).SaveBinlogPaths(ctx, &coordpb.SaveBinlogPathsRequest{NodeId: o.node,
			Vchannel: s.vch, PchannelTerm: o.term, SegmentId: seg, CollectionId: s.coll, PartitionId: s.coll + 1,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: e.logID.Add(1),
				EntriesNum: 100, TimestampFrom: t - 1, TimestampTo: t, MemorySize: 100 << 10}}}},
			Checkpoints: []*coordpb.SegmentCheckpoint{{SegmentId: seg, Position: pos, NumOfRows: s.rows}}, Flushed: flushed})
		e.refused(ctx, err)
		if err != nil {
			return 0, err
		}
		if flushed {
			s.sealed = 0
		}
		if resp.Stale {
			s.seg = 0 // sealed and flushed elsewhere: take a new one next time
			return 0, fmt.Errorf("save of segment %d answered stale (%s)", seg, resp.State)
		}
		return 1, nil
	}
}

// sealOp: a Flush of one working collection, sealing its growing
// segments (the working one among them: the next save finishes it).
func (e *env) sealOp(f *flushPath) func(ctx context.Context) (int, error) {
	var next atomic.Int64
	return func(ctx context.Context) (int, error) {
		s := f.slots[int(next.Add(1))%len(f.slots)]
		resp, err := coordpb.NewDataCoordClient(e.leaderConn()).Flush(ctx, &coordpb.FlushRequest{CollectionId: s.coll})
		if err != nil {
			return 0, err
		}
		s.mu.Lock()
		for _, id := range resp.SealedSegmentIds {
			if id == s.seg && s.sealed == 0 {
				s.sealed, s.seg = s.seg, 0
			}
		}
		s.mu.Unlock()
		return 1, nil
	}
}

// manifestSet: segments whose first manifest revision the run wrote, and
// whose catalog gets stats entries (AddStats) from the load.
type manifestSet struct {
	segs []*slot
	next atomic.Int64
}

// setupManifests creates a growing segment on each of n VChannels of
// collections the flush path does not use, and writes its first revision.
func (e *env) setupManifests(ctx context.Context, n, skipColls int, st *opStats) (*manifestSet, error) {
	f := newFlushPath(e, n, skipColls)
	m := &manifestSet{}
	mc := coordpb.NewManifestServiceClient(e.leaderConn())
	for _, s := range f.slots {
		if err := retryOwnerMoves(ctx, func(ctx context.Context) error { return e.assign(ctx, s, st) }); err != nil {
			return nil, fmt.Errorf("manifest segments: %w", err)
		}
		err := retryUnavailable(ctx, func(ctx context.Context) error {
			_, err := mc.CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: s.seg,
				RequestId: fmt.Sprintf("scale-create-%d", s.seg),
				Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
					ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100, 101},
						Files: []string{fmt.Sprintf("insert_log/%d/%d/%d/100/0.parquet", s.coll, s.coll+1, s.seg)}}}}}}})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("first manifest of segment %d: %w", s.seg, err)
		}
		m.segs = append(m.segs, s)
	}
	return m, nil
}

// manifestOp: one manifest commit adding a stats file to a segment.
func (e *env) manifestOp(m *manifestSet) func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		s := m.segs[int(m.next.Add(1))%len(m.segs)]
		_, err := coordpb.NewManifestServiceClient(e.leaderConn()).CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: s.seg,
			Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
				Stats: []*coordpb.ManifestStatsEntry{{Key: "bloom_filter", Files: []string{fmt.Sprintf("stats_log/%d/%d/%d/bf-%d", s.coll, s.coll+1, s.seg, nextPosition())}}}}}}})
		if err != nil {
			return 0, err
		}
		return 1, nil
	}
}

// createCollection broadcasts CreateCollection for a new collection with
// shards VChannels (coordd allocates them and targets them with the
// CChannel) and returns the targets.
func (e *env) createCollection(ctx context.Context, conn grpcConn, id int64, shards uint32) ([]string, error) {
	payload, err := proto.Marshal(&coordpb.CreateCollectionPayload{CollectionId: id, Shards: shards})
	if err != nil {
		return nil, err
	}
	resp, err := coordpb.NewBroadcasterClient(conn).Broadcast(ctx, &coordpb.BroadcastRequest{MessageType: "CreateCollection",
		Payload: payload, RequestId: fmt.Sprintf("scale-create-%d", id),
		ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: fmt.Sprintf("default:scale_%d", id)}}})
	if err != nil {
		return nil, err
	}
	var targets []string
	for _, r := range resp.AppendResults {
		targets = append(targets, r.Vchannel)
	}
	return targets, nil
}

// dropCollection broadcasts DropCollection to the collection's targets.
func (e *env) dropCollection(ctx context.Context, conn grpcConn, id int64, targets []string) error {
	payload, err := proto.Marshal(&coordpb.DropCollectionPayload{CollectionId: id})
	if err != nil {
		return err
	}
	_, err = coordpb.NewBroadcasterClient(conn).Broadcast(ctx, &coordpb.BroadcastRequest{MessageType: "DropCollection",
		Payload: payload, Vchannels: targets, RequestId: fmt.Sprintf("scale-drop-%d", id),
		ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: fmt.Sprintf("default:scale_%d", id)}}})
	return err
}

// allocOp: one AllocTimestamp of one timestamp.
func (e *env) allocOp() func(ctx context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		_, err := coordpb.NewAllocatorClient(e.leaderConn()).AllocTimestamp(ctx, &coordpb.AllocTimestampRequest{Count: 1})
		if err != nil {
			return 0, err
		}
		return 1, nil
	}
}
