package main

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/api/coordpb"
)

// w2: the streaming node's hot path. A client alternates AssignSegmentID
// (one 1 KiB row on one of its VChannels) and ReportTimeTicks (a growing
// tick for up to 16 of its VChannels held by the same node).
func w2() workloadDef {
	return workloadDef{setup: setupData, variants: []variant{{name: "assign+timeticks", newOp: w2Op}}}
}

func w2Op(s *system, c, clients int) clientOp {
	dc := coordpb.NewDataCoordClient(s.conn(c))
	mine := s.data.mine(c, clients)
	return func(ctx context.Context, i int) error {
		v := mine[(i/2)%len(mine)]
		if i%2 == 0 {
			_, err := dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: v.node, Requests: []*coordpb.SegmentIDRequest{
				{CollectionId: v.collection, PartitionId: 1, Vchannel: v.name, PchannelTerm: v.term, Rows: 1, Bytes: 1024}}})
			return err
		}
		t := nextPosition()
		req := &coordpb.ReportTimeTicksRequest{NodeId: v.node}
		for _, o := range mine {
			if o.node == v.node && len(req.Ticks) < 16 {
				req.Ticks = append(req.Ticks, &coordpb.ChannelTimeTick{Vchannel: o.name, PchannelTerm: o.term, TimeTick: t})
			}
		}
		resp, err := dc.ReportTimeTicks(ctx, req)
		if err == nil && len(resp.Refused) > 0 {
			err = fmt.Errorf("ticks refused: %v", resp.Refused)
		}
		return err
	}
}
