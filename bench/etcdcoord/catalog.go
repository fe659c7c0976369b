package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// The catalog is the coordinator's in-memory mirror of what it wrote to
// etcd, as Milvus's datacoord keeps its meta: reads are served from
// memory, and every change is written to etcd first and applied to memory
// once the transaction succeeded. Each VChannel and each segment has its
// own lock, held across its etcd write so that writes to one object are
// ordered; different objects are written concurrently. (Milvus's datacoord
// holds one lock over all segments across the write; per-object locks make
// this peer faster than that, never slower.)

const (
	// pchannelTerm and pchannelNode: the data path (w2..w5) treats every
	// PChannel as held by node 1 at term 1; the streaming node assignment
	// that w6 churns is assign.go's and does not feed this owner check.
	pchannelTerm = 1
	pchannelNode = 1
	// segmentMaxRows bounds a growing segment's allocations (1 KiB rows
	// into a 1 GiB segment).
	segmentMaxBytes = 1 << 30
	allocationTTL   = 2 * time.Second
)

type vchannel struct {
	mu         sync.Mutex
	name       string
	collection int64
	checkpoint *coordpb.Position
	timeTick   uint64
	growing    map[int64]*segment // partition -> growing segment
}

type segment struct {
	mu      sync.Mutex
	info    *coordpb.SegmentInfo // without binlogs
	binlogs map[string]*coordpb.FieldBinlog
	// allocated bytes of unexpired allocations (approximate: never
	// expire within a benchmark run, which only makes segments fill).
	allocated uint64
	manifest  *manifestState
}

type catalog struct {
	kv      *store
	ts, ids *tso

	mu        sync.RWMutex
	pchannels []string
	vchannels map[string]*vchannel
	segments  map[int64]*segment
	nextVch   map[string]int // pchannel -> next vchannel number
}

func newCatalog(kv *store, ts, ids *tso, npch int) (*catalog, error) {
	c := &catalog{kv: kv, ts: ts, ids: ids, vchannels: map[string]*vchannel{}, segments: map[int64]*segment{}, nextVch: map[string]int{}}
	var ops []clientv3.Op
	for i := range npch {
		name := fmt.Sprintf("by-dev-rootcoord-dml_%d", i)
		c.pchannels = append(c.pchannels, name)
		b, _ := proto.Marshal(&coordpb.PChannel{Name: name, Term: pchannelTerm, State: "ASSIGNED", NodeId: pchannelNode})
		ops = append(ops, clientv3.OpPut("streamingcoord-meta/pchannel/"+name, string(b)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := kv.save(ctx, ops); err != nil {
		return nil, fmt.Errorf("save pchannels: %w", err)
	}
	return c, nil
}

func segmentKey(s *coordpb.SegmentInfo) string {
	return fmt.Sprintf("datacoord-meta/s/%d/%d/%d", s.CollectionId, s.PartitionId, s.SegmentId)
}

func binlogKey(s *coordpb.SegmentInfo, kind string, field int64) string {
	return fmt.Sprintf("datacoord-meta/%s/%d/%d/%d/%d", kind, s.CollectionId, s.PartitionId, s.SegmentId, field)
}

func putProto(key string, m proto.Message) clientv3.Op {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %s: %v", key, err)) // only our own well-formed messages get here
	}
	return clientv3.OpPut(key, string(b))
}

// owner checks that (node, term) holds the VChannel's PChannel.
func (c *catalog) owner(name string, node uint64, term int64) (*vchannel, error) {
	c.mu.RLock()
	v := c.vchannels[name]
	c.mu.RUnlock()
	if v == nil {
		return nil, status.Errorf(codes.NotFound, "vchannel %s not found", name)
	}
	if node != pchannelNode || term != pchannelTerm {
		return nil, status.Errorf(codes.FailedPrecondition, "vchannel %s: (node %d, term %d) is not its owner", name, node, term)
	}
	return v, nil
}

func (c *catalog) segment(id int64) *segment {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.segments[id]
}

// channelServer: ListPChannels reports the data path's fixed owner (node
// 1, term 1, which w2..w5 write as); WatchAssignments is the streaming
// nodes' assignment (assign.go), a separate table the churn workload moves.
type channelServer struct {
	coordpb.UnimplementedChannelsServer
	cat *catalog
	asg *assigner
}

func (s *channelServer) WatchAssignments(req *coordpb.WatchAssignmentsRequest, stream grpc.ServerStreamingServer[coordpb.AssignmentUpdate]) error {
	return s.asg.WatchAssignments(req, stream)
}

// AllocVirtualChannels creates count VChannels of a collection over the
// PChannels round robin, in one transaction per 64 keys.
func (s *channelServer) AllocVirtualChannels(ctx context.Context, r *coordpb.AllocVirtualChannelsRequest) (*coordpb.AllocVirtualChannelsResponse, error) {
	c := s.cat
	if r.Count == 0 || r.Count > 1024 {
		return nil, status.Error(codes.InvalidArgument, "count must be in 1..1024")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	var ops []clientv3.Op
	for i := range int(r.Count) {
		p := c.pchannels[(int(r.CollectionId)+i)%len(c.pchannels)]
		name := fmt.Sprintf("%s_%dv%d", p, r.CollectionId, c.nextVch[p])
		c.nextVch[p]++
		names = append(names, name)
		ops = append(ops, putProto("root-coord/vchannel/"+name, &coordpb.ChannelCheckpoint{Vchannel: name}))
	}
	if err := c.kv.save(ctx, ops); err != nil {
		return nil, status.Errorf(codes.Unavailable, "alloc vchannels: %v", err)
	}
	for _, n := range names {
		c.vchannels[n] = &vchannel{name: n, collection: r.CollectionId, growing: map[int64]*segment{}}
	}
	return &coordpb.AllocVirtualChannelsResponse{Vchannels: names}, nil
}

func (s *channelServer) ListPChannels(context.Context, *coordpb.ListPChannelsRequest) (*coordpb.ListPChannelsResponse, error) {
	resp := &coordpb.ListPChannelsResponse{Cchannel: s.cat.pchannels[0] + "_vcchan"}
	for _, p := range s.cat.pchannels {
		resp.Pchannels = append(resp.Pchannels, &coordpb.PChannel{Name: p, Term: pchannelTerm, State: "ASSIGNED", NodeId: pchannelNode})
	}
	return resp, nil
}

type dataServer struct {
	coordpb.UnimplementedDataCoordServer
	cat *catalog
}

// AssignSegmentID answers from memory; only a new segment is written (one
// transaction with its key).
func (s *dataServer) AssignSegmentID(ctx context.Context, r *coordpb.AssignSegmentIDRequest) (*coordpb.AssignSegmentIDResponse, error) {
	c := s.cat
	resp := &coordpb.AssignSegmentIDResponse{}
	for _, q := range r.Requests {
		v, err := c.owner(q.Vchannel, r.NodeId, q.PchannelTerm)
		if err != nil {
			return nil, err
		}
		seg, err := c.growingSegment(ctx, v, q)
		if err != nil {
			return nil, err
		}
		ts, err := c.ts.alloc(1)
		if err != nil {
			return nil, err
		}
		exp := ts + uint64(allocationTTL.Milliseconds())<<logicalBits
		resp.Assignments = append(resp.Assignments, &coordpb.SegmentIDAssignment{SegmentId: seg.info.SegmentId, CollectionId: q.CollectionId,
			PartitionId: q.PartitionId, Vchannel: q.Vchannel, Rows: q.Rows, Bytes: q.Bytes, ExpireTs: exp,
			ExpireUnixMs: time.Now().Add(allocationTTL).UnixMilli()})
	}
	return resp, nil
}

// growingSegment returns the VChannel's growing segment of the partition
// with room for the request, creating one when there is none.
func (c *catalog) growingSegment(ctx context.Context, v *vchannel, q *coordpb.SegmentIDRequest) (*segment, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if seg := v.growing[q.PartitionId]; seg != nil {
		seg.mu.Lock()
		ok := seg.allocated+q.Bytes <= segmentMaxBytes && seg.info.State == "Growing"
		if ok {
			seg.allocated += q.Bytes
		}
		seg.mu.Unlock()
		if ok {
			return seg, nil
		}
	}
	id, err := c.ids.alloc(1)
	if err != nil {
		return nil, err
	}
	info := &coordpb.SegmentInfo{SegmentId: int64(id), CollectionId: q.CollectionId, PartitionId: q.PartitionId, Vchannel: v.name,
		Level: "L1", State: "Growing", CreatedUnixMs: time.Now().UnixMilli()}
	if err := c.kv.txn(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(segmentKey(info)), "=", 0)},
		[]clientv3.Op{putProto(segmentKey(info), info)}); err != nil {
		return nil, status.Errorf(codes.Unavailable, "create segment: %v", err)
	}
	seg := &segment{info: info, binlogs: map[string]*coordpb.FieldBinlog{}, allocated: q.Bytes}
	c.mu.Lock()
	c.segments[info.SegmentId] = seg
	c.mu.Unlock()
	v.growing[q.PartitionId] = seg
	return seg, nil
}

// ReportTimeTicks is memory only.
func (s *dataServer) ReportTimeTicks(_ context.Context, r *coordpb.ReportTimeTicksRequest) (*coordpb.ReportTimeTicksResponse, error) {
	resp := &coordpb.ReportTimeTicksResponse{}
	for _, t := range r.Ticks {
		v, err := s.cat.owner(t.Vchannel, r.NodeId, t.PchannelTerm)
		if err != nil {
			resp.Refused = append(resp.Refused, t.Vchannel+": "+status.Convert(err).Message())
			continue
		}
		v.mu.Lock()
		v.timeTick = max(v.timeTick, t.TimeTick)
		v.mu.Unlock()
		resp.Accepted++
	}
	return resp, nil
}

func newer(a, b *coordpb.Position) bool {
	if b == nil {
		return true
	}
	return a.Timestamp > b.Timestamp || a.Timestamp == b.Timestamp && a.Offset > b.Offset
}

// UpdateChannelCheckpoints writes every accepted checkpoint in one
// batched save (64 keys per transaction).
func (s *dataServer) UpdateChannelCheckpoints(ctx context.Context, r *coordpb.UpdateChannelCheckpointsRequest) (*coordpb.UpdateChannelCheckpointsResponse, error) {
	resp := &coordpb.UpdateChannelCheckpointsResponse{}
	type change struct {
		v   *vchannel
		pos *coordpb.Position
	}
	var locked []*vchannel
	defer func() {
		for _, v := range locked {
			v.mu.Unlock()
		}
	}()
	cps := slices.Clone(r.Checkpoints)
	slices.SortFunc(cps, func(a, b *coordpb.ChannelCheckpoint) int { return cmpString(a.Vchannel, b.Vchannel) }) // lock order
	var changes []change
	var ops []clientv3.Op
	for i, cp := range cps {
		if i > 0 && cp.Vchannel == cps[i-1].Vchannel {
			resp.Refused = append(resp.Refused, cp.Vchannel+": duplicate")
			continue
		}
		v, err := s.cat.owner(cp.Vchannel, r.NodeId, cp.PchannelTerm)
		if err != nil || cp.Position == nil {
			resp.Refused = append(resp.Refused, cp.Vchannel+": not the owner or no position")
			continue
		}
		v.mu.Lock()
		locked = append(locked, v)
		if !newer(cp.Position, v.checkpoint) {
			resp.Refused = append(resp.Refused, cp.Vchannel+": older than stored")
			continue
		}
		changes = append(changes, change{v, cp.Position})
		ops = append(ops, putProto("datacoord-meta/channel-cp/"+cp.Vchannel, cp.Position))
	}
	if err := s.cat.kv.save(ctx, ops); err != nil {
		return nil, status.Errorf(codes.Unavailable, "save checkpoints: %v", err)
	}
	for _, ch := range changes {
		ch.v.checkpoint = ch.pos
		resp.Accepted++
	}
	return resp, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
