package fsm

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// SyntheticShape sizes a state built by Synthetic for benchmarks and scale
// measurements (docs/scaling.md).
type SyntheticShape struct {
	Segments   int // segments, states mixed as a busy cluster holds them
	VChannels  int // VChannels (4 per collection); 0 means Segments/10, at least 4
	Tombstones int // finished DDL broadcasts kept for their idempotency window
	PChannels  int // PChannels the VChannels spread over; 0 means 16
	// ManifestPointers gives every other Flushed segment a published
	// manifest pointer (version 1 at its default base, storage version 3)
	// beside its binlogs, and the Growing segments storage version 3, as
	// Milvus 2.6 writes segments once storage v3 is on.
	ManifestPointers bool
}

// Synthetic builds, deterministically and without the log, a state shaped
// like a busy cluster's: 16 PChannels (or shape.PChannels); VChannels in collections of 4; each
// segment on one of them (10 consecutive segments per VChannel) with start
// and DML positions (PChannel term 1, within a committed TSO window) and,
// once sealed, 4 fields × 2 insert binlogs plus a
// stats log, states 10 % growing, 20 % sealed, 5 % flushing, 60 % flushed,
// 5 % dropped; and tombstoned DDL broadcasts, each to 16 VChannels and the
// control channel, every target acked. Every invariant holds on the result
// (CheckInvariants).
func Synthetic(shape SyntheticShape) (*State, error) {
	s, err := syntheticChannels(shape)
	if err != nil {
		return nil, err
	}
	s.addSyntheticSegmentsWith(shape.Segments, shape.ManifestPointers)
	s.addSyntheticTombstones(shape.Tombstones)
	return s, nil
}

// syntheticCollection is the ID of the c-th synthetic collection (from 1).
func syntheticCollection(c int) int64 { return int64(449000000 + c) }

// syntheticChannels is the state with streaming initialised and the
// shape's collections and their VChannels recorded.
func syntheticChannels(shape SyntheticShape) (*State, error) {
	var pcs []string
	npc := shape.PChannels
	if npc <= 0 {
		npc = 16
	}
	for i := 0; i < npc; i++ {
		pcs = append(pcs, vocab.PChannelName("by-dev-rootcoord-dml", i))
	}
	init, err := commands.New(&logpb.InitStreaming{ClusterId: "by-dev", Pchannels: pcs}, "")
	if err != nil {
		return nil, fmt.Errorf("synthetic state: %w", err)
	}
	s, res, err := New().ApplyCommands(1, init)
	if err != nil || res[0].Rejection != nil {
		return nil, fmt.Errorf("synthetic state: init streaming: %v %v", err, res[0].GetRejection())
	}
	next := *s
	for c := 1; c <= syntheticCollections(shape); c++ {
		if r := allocVirtualChannels(&next, syntheticCollection(c), 4); r.Rejection != nil {
			return nil, fmt.Errorf("synthetic state: collection %d: %v", c, r.Rejection)
		}
	}
	return &next, nil
}

func syntheticCollections(shape SyntheticShape) int {
	v := shape.VChannels
	if v == 0 {
		v = shape.Segments / 10
	}
	return max(1, v/4)
}

// addSyntheticSegments adds n segments spread over the collections already
// recorded (s is a private copy being built, never a published state).
func (s *State) addSyntheticSegments(n int) { s.addSyntheticSegmentsWith(n, false) }

// addSyntheticSegmentsWith is addSyntheticSegments, with manifest
// pointers on half the Flushed segments when pointers is set.
func (s *State) addSyntheticSegmentsWith(n int, pointers bool) {
	colls := s.ch.collections.Len()
	states := []logpb.SegmentState{2, 3, 3, 5, 4, 4, 4, 4, 4, 4, 4, 4, 6, 2, 3, 4, 4, 4, 4, 6}
	base := int64(s.alloc.nextID)
	for i := 0; i < n; i++ {
		coll := syntheticCollection(1 + (i/10)%colls)
		cr, _ := s.ch.collections.Get(coll)
		vch := cr.Vchannels[(i/10/colls)%4]
		id := base + int64(i)
		ts := uint64(449326301000000 + i)
		g := &Segment{ID: id, CollectionID: coll, PartitionID: coll + 1, VChannel: vch, Level: logpb.SegmentLevel_LEVEL_L1,
			State: states[i%len(states)], CreatedMs: 1700000000000 + int64(i), LastWriteMs: 1700000000000 + int64(i),
			Start: Position{Term: 1, Offset: uint64(i), Timestamp: ts}, StorageVersion: 2}
		if g.State != logpb.SegmentState_SEGMENT_GROWING {
			g.SealTs, g.SealedMs, g.SealReason = ts+100, g.CreatedMs+1000, logpb.SealReason_SEAL_CAPACITY
			g.DML = Position{Term: 1, Offset: uint64(i) + 100, Timestamp: ts + 100}
			g.NumRows, g.Size = 100000, 120<<20
			for f := int64(0); f < 4; f++ {
				g.Binlogs = append(g.Binlogs, FieldLogs{FieldID: 100 + f, Logs: []LogRef{
					{LogID: id*16 + f*2, Entries: 50000, TsFrom: ts, TsTo: ts + 50, MemorySize: 15 << 20},
					{LogID: id*16 + f*2 + 1, Entries: 50000, TsFrom: ts + 50, TsTo: ts + 100, MemorySize: 15 << 20}}})
			}
			g.Statslogs = []FieldLogs{{FieldID: 100, Logs: []LogRef{{LogID: id*16 + 9, Entries: 100000, TsFrom: ts, TsTo: ts + 100, MemorySize: 4096}}}}
		}
		if pointers && g.State == logpb.SegmentState_SEGMENT_GROWING {
			g.StorageVersion = StorageV3 // written since storage v3 was on
		}
		if pointers && g.State == logpb.SegmentState_SEGMENT_FLUSHED && i%2 == 0 {
			g.StorageVersion = StorageV3
			g.ManifestPath = commands.ManifestPointer{Base: commands.ManifestBase(coll, coll+1, id), Version: 1}.String()
		}
		if g.State == logpb.SegmentState_SEGMENT_DROPPED {
			g.DroppedMs = g.CreatedMs + 5000
		}
		s.seg.put(g)
	}
	s.alloc.nextID = uint64(base + int64(n))
	// The positions' time ticks came from a TSO window (position bounds).
	s.alloc.tsoLimitPhysicalMs = max(s.alloc.tsoLimitPhysicalMs, PhysicalMs(uint64(449326301000000+n+100))+1)
}

// addSyntheticTombstones adds n finished CreateCollection broadcasts, each
// to the VChannels of 4 consecutive collections and the control channel,
// with every target acked, an exclusive collection-name key and an
// idempotency key (s is a private copy being built).
func (s *State) addSyntheticTombstones(n int) {
	colls := s.ch.collections.Len()
	cch := s.CChannel()
	for k := 0; k < n; k++ {
		targets := []string{cch}
		for j := 0; j < 4; j++ {
			cr, _ := s.ch.collections.Get(syntheticCollection(1 + (4*k+j)%colls))
			targets = append(targets, cr.Vchannels...)
		}
		sort.Strings(targets)
		targets = dedupSorted(targets)
		t := &logpb.BroadcastTask{Id: s.alloc.nextID, MessageType: vocab.MsgCreateCollection,
			ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME,
				Key: fmt.Sprintf("default/synthetic_collection_%d", k)}},
			Vchannels: targets, IdempotencyKey: fmt.Sprintf("create-collection-%d", k),
			State: logpb.BroadcastState_BROADCAST_TOMBSTONE, CreatedMs: 1700000000000 + int64(k), TombstonedMs: 1700000000100 + int64(k),
			TombstoneSeq: s.bc.meta.NextTombstoneSeq}
		for i, v := range targets {
			t.Acked = append(t.Acked, &logpb.VChannelCheckpoint{Vchannel: v, Term: 3, Offset: uint64(1000*k + i), TimeTick: uint64(449326301000000 + k)})
		}
		s.alloc.nextID++
		m := proto.Clone(s.bc.meta).(*logpb.BroadcastMeta)
		m.NextTombstoneSeq++
		s.bc.meta = m
		s.bc.put(t)
	}
}

// dedupSorted drops repeats from a sorted slice (a small state can give a
// broadcast the same collection twice).
func dedupSorted(v []string) []string {
	out := v[:0]
	for i, x := range v {
		if i == 0 || x != v[i-1] {
			out = append(out, x)
		}
	}
	return out
}
