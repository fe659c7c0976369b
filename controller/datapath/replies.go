package datapath

import (
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/flush"
)

// AssignReply is the AssignSegmentID answer to req: as, the service's
// assignments, one per request row in its order, with each row's
// collection, partition, VChannel and size.
func AssignReply(req *coordpb.AssignSegmentIDRequest, as []flush.Assignment) *coordpb.AssignSegmentIDResponse {
	out := &coordpb.AssignSegmentIDResponse{Assignments: make([]*coordpb.SegmentIDAssignment, len(as))}
	for i, a := range as {
		r := req.Requests[i]
		out.Assignments[i] = &coordpb.SegmentIDAssignment{SegmentId: a.SegmentID, CollectionId: r.CollectionId,
			PartitionId: r.PartitionId, Vchannel: r.Vchannel, Rows: r.Rows, Bytes: r.Bytes,
			ExpireTs: a.ExpireTs, ExpireUnixMs: a.Expire.UnixMilli()}
	}
	return out
}
