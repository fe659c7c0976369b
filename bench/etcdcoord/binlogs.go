package main

import (
	"context"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// SaveBinlogPaths is Milvus's flusher save: the segment's record and the
// complete binlog list of every field it touches are rewritten (one key
// per segment and per field and kind, as Milvus's catalog lays them out),
// together with the DML positions of the listed segments, in one batched
// save (64 keys per transaction).
func (s *dataServer) SaveBinlogPaths(ctx context.Context, r *coordpb.SaveBinlogPathsRequest) (*coordpb.SaveBinlogPathsResponse, error) {
	c := s.cat
	if _, err := c.owner(r.Vchannel, r.NodeId, r.PchannelTerm); err != nil {
		return nil, err
	}
	seg := c.segment(r.SegmentId)
	if seg == nil {
		return nil, status.Errorf(codes.NotFound, "segment %d not found", r.SegmentId)
	}
	// Lock the segment and the other segments whose positions change, in
	// ID order.
	touched := []*segment{seg}
	for _, cp := range r.Checkpoints {
		if o := c.segment(cp.SegmentId); o != nil && !slices.Contains(touched, o) {
			touched = append(touched, o)
		}
	}
	slices.SortFunc(touched, func(a, b *segment) int { return int(a.info.SegmentId - b.info.SegmentId) })
	for _, t := range touched {
		t.mu.Lock()
		defer t.mu.Unlock()
	}
	if seg.info.State == "Flushed" || seg.info.State == "Dropped" {
		return &coordpb.SaveBinlogPathsResponse{Stale: true, State: seg.info.State}, nil
	}
	infos := map[*segment]*coordpb.SegmentInfo{}
	for _, cp := range r.Checkpoints {
		o := c.segment(cp.SegmentId)
		if o == nil || cp.Position == nil {
			continue
		}
		if o == seg && !r.WithFullBinlogs && !newer(cp.Position, o.info.DmlPosition) {
			return &coordpb.SaveBinlogPathsResponse{Stale: true, State: seg.info.State}, nil
		}
		ni := proto.Clone(o.info).(*coordpb.SegmentInfo)
		ni.DmlPosition, ni.NumOfRows = cp.Position, cp.NumOfRows
		infos[o] = ni
	}
	ni, ok := infos[seg]
	if !ok {
		ni = proto.Clone(seg.info).(*coordpb.SegmentInfo)
		infos[seg] = ni
	}
	if r.Flushed {
		ni.State = "Flushed"
	}
	if r.Dropped {
		ni.State = "Dropped"
	}
	ni.StorageVersion, ni.ManifestPath = r.StorageVersion, r.ManifestPath
	newLists := map[string]*coordpb.FieldBinlog{}
	var ops []clientv3.Op
	merge := func(kind string, fields []*coordpb.FieldBinlog) {
		for _, f := range fields {
			k := binlogKey(ni, kind, f.FieldId)
			cur := seg.binlogs[k]
			var list *coordpb.FieldBinlog
			if cur == nil || r.WithFullBinlogs {
				list = &coordpb.FieldBinlog{FieldId: f.FieldId, Binlogs: slices.Clone(f.Binlogs)}
			} else {
				list = &coordpb.FieldBinlog{FieldId: f.FieldId, Binlogs: append(slices.Clone(cur.Binlogs), f.Binlogs...)}
			}
			newLists[k] = list
			ops = append(ops, putProto(k, list))
		}
	}
	merge("binlog", r.FieldBinlogs)
	merge("statslog", r.FieldStatslogs)
	merge("deltalog", r.Deltalogs)
	for _, info := range infos {
		ops = append(ops, putProto(segmentKey(info), info))
	}
	if err := c.kv.save(ctx, ops); err != nil {
		return nil, status.Errorf(codes.Unavailable, "save binlogs: %v", err)
	}
	for o, info := range infos {
		o.info = info
	}
	for k, l := range newLists {
		seg.binlogs[k] = l
	}
	return &coordpb.SaveBinlogPathsResponse{State: ni.State}, nil
}
