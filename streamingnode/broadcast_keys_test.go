package streamingnode

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/api/coordpb"
)

// TestWriterCannotClaimABroadcastsRecord: a broadcast's record in a WAL is
// coordd's alone (docs/security.md#the-streaming-nodes-port). On a secure
// node a proxy certificate (a data-path writer) and the node's own
// certificate try to take the next broadcast's dedup key, with an Append
// naming it (refused: broadcast_id needs coord_term) and with an Insert
// whose dedup_id is that number (written, in the DML key space). coordd's
// append of the broadcast then lands as a new record with coordd's payload,
// not as a Duplicate of the writer's record, and Read shows the insert
// without a broadcast ID.
func TestWriterCannotClaimABroadcastsRecord(t *testing.T) {
	n := startSecureNode(t)
	pki, coordd, nodeMat, load, dial := n.pki, n.coordd, n.node, n.load, n.dial
	n.cl = dial(coordd)
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	id, epoch := n.Session()
	const next = 42 // the broadcast coordd will create next
	ctx := context.Background()

	writers := map[string]coordpb.StreamingNodeServiceClient{"the proxy certificate": dial(load(pki.Proxy)),
		"the node's own certificate": dial(nodeMat)}
	for who, w := range writers {
		_, err := w.Append(ctx, &coordpb.AppendRequest{Vchannel: vch, Term: 2, Payload: []byte("written by a writer"),
			BroadcastId: next, NodeId: id, Epoch: epoch})
		wantErr(t, err, codes.InvalidArgument, "coord_term")
		_, err = w.Append(ctx, &coordpb.AppendRequest{Vchannel: vch, Term: 2, Payload: []byte("written by a writer"),
			BroadcastId: next, AckSyncUp: true, NodeId: id, Epoch: epoch})
		if err == nil {
			t.Fatalf("%s: an ack_sync_up Append naming broadcast %d was written", who, next)
		}
		ins, err := w.Insert(ctx, &coordpb.InsertRequest{Vchannel: vch, Term: 2, CollectionId: 100, Pks: []int64{1, 2},
			DedupId: next, NodeId: id, Epoch: epoch})
		if err != nil {
			t.Fatalf("%s: Insert with dedup_id %d: %v", who, next, err)
		}
		t.Logf("%s: Insert(dedup_id=%d) → %v", who, next, ins)
	}

	// coordd's broadcaster appends broadcast 42 (coord_term 3).
	cr, err := n.cl.Append(ctx, &coordpb.AppendRequest{Vchannel: vch, Term: 2, Payload: []byte("DropCollection 100"),
		BroadcastId: next, CoordTerm: 3, NodeId: id, Epoch: epoch})
	if err != nil || cr.Duplicate {
		t.Fatalf("coordd's append of broadcast %d: %v %v (a writer's record holds its key)", next, cr, err)
	}
	again, err := n.cl.Append(ctx, &coordpb.AppendRequest{Vchannel: vch, Term: 2, Payload: []byte("DropCollection 100"),
		BroadcastId: next, CoordTerm: 3, NodeId: id, Epoch: epoch})
	if err != nil || !again.Duplicate || again.Id.Offset != cr.Id.Offset {
		t.Fatalf("coordd's retry of broadcast %d: %v %v, want a Duplicate of offset %d", next, again, err, cr.Id.Offset)
	}
	got := n.readAll(t, vch, 0)
	var holders []string
	for _, m := range got {
		if m.BroadcastId == next {
			holders = append(holders, string(m.Payload))
		}
	}
	if len(got) != 2 || len(holders) != 1 || holders[0] != "DropCollection 100" {
		t.Fatalf("WAL of %s: %d records, broadcast %d held by %q; want the insert then coordd's message",
			vch, len(got), next, holders)
	}
}
