package streamingnode

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/dml"
	"github.com/coordd/coordd/streamingnode/wal"
)

// fakeData is the fake coordinator's DataCoord: AssignSegmentID hands out
// segment 42 with an allocation expiring in expireIn.
type fakeData struct {
	coordpb.UnimplementedDataCoordServer
	mu      sync.Mutex
	calls   []*coordpb.AssignSegmentIDRequest
	expired bool // answer with allocations that have already expired
	refuse  error
}

func (d *fakeData) AssignSegmentID(_ context.Context, req *coordpb.AssignSegmentIDRequest) (*coordpb.AssignSegmentIDResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, req)
	if d.refuse != nil {
		return nil, d.refuse
	}
	exp := time.Now().Add(2 * time.Second)
	expTs := uint64(1) << 62
	if d.expired {
		exp, expTs = time.Now().Add(-time.Second), 1
	}
	var out []*coordpb.SegmentIDAssignment
	for _, r := range req.Requests {
		out = append(out, &coordpb.SegmentIDAssignment{SegmentId: 42, CollectionId: r.CollectionId, PartitionId: r.PartitionId,
			Vchannel: r.Vchannel, Rows: r.Rows, Bytes: r.Bytes, ExpireTs: expTs, ExpireUnixMs: exp.UnixMilli()})
	}
	return &coordpb.AssignSegmentIDResponse{Assignments: out}, nil
}

func (n *testNode) insert(req *coordpb.InsertRequest) (*coordpb.InsertResponse, error) {
	if req.NodeId == 0 {
		req.NodeId, req.Epoch = n.Session()
	}
	return n.cl.Insert(context.Background(), req)
}

func TestInsertAssignsASegment(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n := startNode(t, f, dir, nil)
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	resp, err := n.insert(&coordpb.InsertRequest{Vchannel: vch, Term: 2, CollectionId: 100, PartitionId: 7, Pks: []int64{5, 6, 7}, DedupId: 5})
	if err != nil {
		t.Fatal(err)
	}
	if resp.SegmentId != 42 || resp.Duplicate {
		t.Fatalf("insert answered %v", resp)
	}
	f.data.mu.Lock()
	call := f.data.calls[0]
	f.data.mu.Unlock()
	id, _ := n.Session()
	if call.NodeId != id || len(call.Requests) != 1 || call.Requests[0].PchannelTerm != 2 || call.Requests[0].Rows != 3 ||
		call.Requests[0].Vchannel != vch || call.Requests[0].PartitionId != 7 {
		t.Fatalf("AssignSegmentID got %v", call)
	}
	recs, err := wal.ReadAll(dir, pch, "", 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("WAL: %v, %v", recs, err)
	}
	m, err := dml.DecodeInsert(recs[0].Payload)
	if err != nil || m.Segment != 42 || m.Collection != 100 || m.Partition != 7 || len(m.PKs) != 3 || m.PKs[2] != 7 {
		t.Fatalf("WAL message %+v, %v", m, err)
	}
	if recs[0].Timestamp != resp.Timestamp {
		t.Fatalf("record ts %d, answer %d", recs[0].Timestamp, resp.Timestamp)
	}
	// A retry with the same dedup ID is answered with the first message.
	again, err := n.insert(&coordpb.InsertRequest{Vchannel: vch, Term: 2, CollectionId: 100, PartitionId: 7, Pks: []int64{5, 6, 7}, DedupId: 5})
	if err != nil || !again.Duplicate || again.Id.Offset != resp.Id.Offset {
		t.Fatalf("retry: %v, %v", again, err)
	}
	if recs, _ := wal.ReadAll(dir, pch, "", 0); len(recs) != 1 {
		t.Fatalf("the retry was written again: %d records", len(recs))
	}
}

// Bad input and requests this node must not serve are refused, and
// nothing reaches the WAL or coordd.
func TestInsertRefusals(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n := startNode(t, f, dir, nil)
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	id, epoch := n.Session()
	for _, tc := range []struct {
		name string
		req  *coordpb.InsertRequest
		code codes.Code
	}{
		{"cchannel", &coordpb.InsertRequest{Vchannel: cch, CollectionId: 100, Pks: []int64{1}}, codes.InvalidArgument},
		{"pchannel", &coordpb.InsertRequest{Vchannel: pch, CollectionId: 100, Pks: []int64{1}}, codes.InvalidArgument},
		{"other collection", &coordpb.InsertRequest{Vchannel: vch, CollectionId: 2, Pks: []int64{1}}, codes.InvalidArgument},
		{"no collection", &coordpb.InsertRequest{Vchannel: vch, Pks: []int64{1}}, codes.InvalidArgument},
		{"negative partition", &coordpb.InsertRequest{Vchannel: vch, CollectionId: 100, PartitionId: -1, Pks: []int64{1}}, codes.InvalidArgument},
		{"no rows", &coordpb.InsertRequest{Vchannel: vch, CollectionId: 1}, codes.InvalidArgument},
		{"too many rows", &coordpb.InsertRequest{Vchannel: vch, CollectionId: 100, Pks: make([]int64, dml.MaxRows+1)}, codes.InvalidArgument},
		{"no identity", &coordpb.InsertRequest{Vchannel: vch, CollectionId: 100, Pks: []int64{1}, NodeId: id}, codes.InvalidArgument},
		{"other node", &coordpb.InsertRequest{Vchannel: vch, CollectionId: 100, Pks: []int64{1}, NodeId: id + 1, Epoch: epoch}, codes.FailedPrecondition},
		{"wrong term", &coordpb.InsertRequest{Vchannel: vch, Term: 1, CollectionId: 100, Pks: []int64{1}}, codes.FailedPrecondition},
		{"not held", &coordpb.InsertRequest{Vchannel: "dml_1_100v0", CollectionId: 100, Pks: []int64{1}}, codes.FailedPrecondition},
	} {
		if tc.req.NodeId == 0 {
			tc.req.NodeId, tc.req.Epoch = id, epoch
		}
		_, err := n.cl.Insert(context.Background(), tc.req)
		if status.Code(err) != tc.code {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.code)
		}
	}
	f.data.mu.Lock()
	calls := len(f.data.calls)
	f.data.mu.Unlock()
	if calls != 0 {
		t.Fatalf("%d AssignSegmentID calls for refused inserts", calls)
	}
	// coordd refusing the allocation, or only expired allocations: nothing
	// is written.
	f.data.mu.Lock()
	f.data.refuse = status.Error(codes.FailedPrecondition, "not the owner")
	f.data.mu.Unlock()
	if _, err := n.insert(&coordpb.InsertRequest{Vchannel: vch, CollectionId: 100, Pks: []int64{1}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("refused allocation: %v", err)
	}
	f.data.mu.Lock()
	f.data.refuse, f.data.expired = nil, true
	f.data.mu.Unlock()
	if _, err := n.insert(&coordpb.InsertRequest{Vchannel: vch, CollectionId: 100, Pks: []int64{1}}); status.Code(err) != codes.Unavailable {
		t.Fatalf("expired allocations: %v", err)
	}
	// Append does not take DML messages: rows get segments only through
	// Insert.
	payload, _ := dml.EncodeInsert(&dml.Insert{Collection: 1, Segment: 9, PKs: []int64{1}})
	if _, err := n.append(vch, 2, string(payload), 0); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Append of a DML payload: %v", err)
	}
	if recs, _ := wal.ReadAll(dir, pch, "", 0); len(recs) != 0 {
		t.Fatalf("refused inserts wrote %d records", len(recs))
	}
}
