package datapath

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/vocab"
)

// The data path's reads are answered by the API from a state it reads
// (linearizable or not); their requests are checked here, with the limits
// the data path's commands have, so a read and a write agree on them.

// CheckFlushState checks a GetFlushState request: a collection ID that is
// not negative (with a flush_ts when given) and at most
// commands.MaxSegmentsPerCmd segment IDs.
func CheckFlushState(req *coordpb.GetFlushStateRequest) error {
	if req.CollectionId < 0 || len(req.SegmentIds) > commands.MaxSegmentsPerCmd {
		return vocab.Errorf(commands.ErrInvalid, "collection_id must not be negative and at most %d segment ids", commands.MaxSegmentsPerCmd)
	}
	if req.FlushTs == 0 && req.CollectionId > 0 {
		return vocab.Errorf(commands.ErrInvalid, "flush_ts is required with a collection")
	}
	return nil
}

// CheckSegmentInfo checks a GetSegmentInfo request: 1..
// commands.MaxSegmentsPerCmd segment IDs.
func CheckSegmentInfo(req *coordpb.GetSegmentInfoRequest) error {
	if len(req.SegmentIds) == 0 || len(req.SegmentIds) > commands.MaxSegmentsPerCmd {
		return vocab.Errorf(commands.ErrInvalid, "need 1..%d segment ids", commands.MaxSegmentsPerCmd)
	}
	return nil
}
