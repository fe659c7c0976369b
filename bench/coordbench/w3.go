package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/coordd/coordd/api/coordpb"
)

// w3: committed writes of the flusher over 1,000 VChannels. A client
// alternates a channel checkpoint (UpdateChannelCheckpoints of one
// VChannel) and a SaveBinlogPaths of the VChannel's growing segment (one
// new insert binlog of one field and the segment's new DML position), over
// its own VChannels in turn. A refused checkpoint or a stale save counts
// as an error; a call refused as not the owner re-reads the owners.
func w3() workloadDef {
	return workloadDef{setup: setupData, variants: []variant{{name: "checkpoint+binlogs-1000vch", newOp: w3Op},
		{name: "checkpoint-batch-128", counted: true, newOp: w3BatchOp}}}
}

func w3Op(s *system, c, clients int) clientOp {
	dc := coordpb.NewDataCoordClient(s.conn(c))
	mine := s.data.mine(c, clients)
	return func(ctx context.Context, i int) error {
		v := s.data.current(mine[(i/2)%len(mine)])
		t := nextPosition()
		pos := &coordpb.Position{Term: v.term, Offset: t - positionBase, Timestamp: t}
		if i%2 == 0 {
			resp, err := dc.UpdateChannelCheckpoints(ctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: v.node,
				Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: v.name, PchannelTerm: v.term, Position: pos}}})
			if err == nil && len(resp.Refused) > 0 {
				err = fmt.Errorf("checkpoint refused: %s", strings.Join(resp.Refused, "; "))
			}
			s.data.refused(s.conn(c), err)
			return err
		}
		resp, err := dc.SaveBinlogPaths(ctx, &coordpb.SaveBinlogPathsRequest{NodeId: v.node, Vchannel: v.name, PchannelTerm: v.term,
			SegmentId: v.segment, CollectionId: v.collection, PartitionId: 1,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: int64(t - positionBase),
				EntriesNum: 100, TimestampFrom: t - 1, TimestampTo: t, MemorySize: 100 << 10}}}},
			Checkpoints: []*coordpb.SegmentCheckpoint{{SegmentId: v.segment, Position: pos, NumOfRows: int64(i)}}})
		if err == nil && resp.Stale {
			err = fmt.Errorf("save answered stale (segment %s)", resp.State)
		}
		s.data.refused(s.conn(c), err)
		return err
	}
}
