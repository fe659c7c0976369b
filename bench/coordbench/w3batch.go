package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/coordd/coordd/api/coordpb"
)

// w3's checkpoint-batch variant: Milvus's data nodes send channel
// checkpoints in batches (up to 128 VChannels in one
// UpdateChannelCheckpoints, every 10 s). Here one op is one such call and
// nothing else (no SaveBinlogPaths: the flush path is the other variant's;
// this one isolates the batched checkpoint write), carrying a checkpoint
// for up to checkpointBatch of the client's own VChannels, each advanced
// to one fresh position (nextPosition: bounded 1 s ahead of the clock).
//
// A call speaks for one streaming node (its NodeId), so it carries only
// VChannels that node owns: the client's VChannels are grouped by their
// current owner (dataSet.current, re-read when a call is refused as not
// the owner), call i takes group i mod groups, and within a group the
// next window of up to 128 in turn. So a call carries up to all of the
// client's VChannels on one owner (at 64 clients a client owns ~15 of the
// 1,000; one client owns them all, and its calls carry 128). The row's
// values/s is the checkpoints accepted per second, counted from the
// answers (system.values); values/s over ops/s is the mean batch.
const checkpointBatch = 128

func w3BatchOp(s *system, c, clients int) clientOp {
	dc := coordpb.NewDataCoordClient(s.conn(c))
	mine := s.data.mine(c, clients)
	return func(ctx context.Context, i int) error {
		batch := checkpointWindow(s.data, mine, i)
		t := nextPosition()
		req := &coordpb.UpdateChannelCheckpointsRequest{NodeId: batch[0].node}
		for _, v := range batch {
			req.Checkpoints = append(req.Checkpoints, &coordpb.ChannelCheckpoint{Vchannel: v.name, PchannelTerm: v.term,
				Position: &coordpb.Position{Term: v.term, Offset: t - positionBase, Timestamp: t}})
		}
		resp, err := dc.UpdateChannelCheckpoints(ctx, req)
		if err == nil && len(resp.Refused) > 0 {
			err = fmt.Errorf("%d of %d checkpoints refused: %s", len(resp.Refused), len(batch), strings.Join(resp.Refused, "; "))
		}
		s.data.refused(s.conn(c), err)
		if err == nil {
			s.values.Add(int64(resp.Accepted))
		}
		return err
	}
}

// checkpointWindow is call i's VChannels out of mine: those of one owner
// (the owners in node order, group i mod their count), at most
// checkpointBatch of them, consecutive (wrapping) and distinct, so that
// successive calls for one owner cycle through all of its VChannels.
func checkpointWindow(d *dataSet, mine []dataVch, i int) []dataVch {
	byNode := map[uint64][]dataVch{}
	for _, v := range mine {
		v = d.current(v)
		byNode[v.node] = append(byNode[v.node], v)
	}
	nodes := make([]uint64, 0, len(byNode))
	for n := range byNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	group := byNode[nodes[i%len(nodes)]]
	size := min(checkpointBatch, len(group))
	start := (i / len(nodes) * size) % len(group)
	out := make([]dataVch, 0, size)
	for k := range size {
		out = append(out, group[(start+k)%len(group)])
	}
	return out
}
