package streamingnode

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/security"
	"github.com/coordd/coordd/testutil"
)

// batchItem is a coordinator append for v meant for n's session.
func (n *testNode) batchItem(v string, term int64, payload string, bid, coordTerm uint64) *coordpb.AppendRequest {
	id, epoch := n.Session()
	return &coordpb.AppendRequest{Vchannel: v, Term: term, Payload: []byte(payload), BroadcastId: bid, CoordTerm: coordTerm,
		NodeId: id, Epoch: epoch}
}

func (n *testNode) appendBatch(t *testing.T, items ...*coordpb.AppendRequest) []*coordpb.AppendBatchResult {
	t.Helper()
	resp, err := n.cl.AppendBatch(context.Background(), &coordpb.AppendBatchRequest{Items: items})
	if err != nil {
		t.Fatalf("AppendBatch: %v", err)
	}
	if len(resp.Results) != len(items) {
		t.Fatalf("%d results for %d items", len(resp.Results), len(items))
	}
	return resp.Results
}

// wantItem checks one item's result: OK with a response, or code with a
// message containing substr.
func wantItem(t *testing.T, i int, r *coordpb.AppendBatchResult, code codes.Code, substr string) {
	t.Helper()
	if codes.Code(r.Code) != code || !strings.Contains(r.Message, substr) || (code == codes.OK) != (r.Response != nil) {
		t.Fatalf("item %d: %v %q (response %v), want %v containing %q", i, codes.Code(r.Code), r.Message, r.Response, code, substr)
	}
}

// TestAppendBatchItemsAnswerOnTheirOwn: each item of an AppendBatch is
// checked like a single coordinator Append (term, RO mode, ownership,
// coordinator-term fence and confirmation, identity, name) and answered
// in its own result; the refused items do not fail the admitted ones. A
// repeated batch is deduplicated per item; a WAL fenced by a newer owner
// refuses its item while another PChannel's item in the same batch is
// written.
func TestAppendBatchItemsAnswerOnTheirOwn(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n1 := startNode(t, f, dir, shortConfirm)
	n2 := startNode(t, f, dir, nil)
	for _, p := range []string{"dml_0", "dml_1"} {
		if err := n1.assign(t, p, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	if err := n1.assignMode(t, "dml_2", 2, 3, "RO"); err != nil {
		t.Fatal(err)
	}
	if _, err := n1.cl.AppendBatch(context.Background(), &coordpb.AppendBatchRequest{}); err == nil {
		t.Fatal("an empty AppendBatch was accepted")
	}
	otherEpoch := n1.batchItem("dml_1_10v0", 2, "b", 77, 3)
	otherEpoch.Epoch++
	items := []*coordpb.AppendRequest{
		n1.batchItem(vch, 2, "b", 77, 3),
		n1.batchItem(cch, 2, "b", 77, 3),
		n1.batchItem("dml_1_5v0", 2, "b", 77, 3),
		n1.batchItem("dml_1_6v0", 3, "b", 77, 3),
		n1.batchItem("dml_2_5v0", 0, "b", 77, 3),
		n1.batchItem("dml_3_5v0", 0, "b", 77, 3),
		n1.batchItem("dml_1_7v0", 2, "b", 77, 0),
		n1.batchItem("dml_1_8v0", 2, "b", 77, 2),
		n1.batchItem("dml_1_9v0", 2, "b", 77, math.MaxUint64),
		otherEpoch,
		n1.batchItem("bad name", 2, "b", 77, 3),
	}
	res := n1.appendBatch(t, items...)
	for i, want := range []struct {
		code   codes.Code
		substr string
	}{
		{codes.OK, ""}, {codes.OK, ""}, {codes.OK, ""},
		{codes.FailedPrecondition, "wrong term"},
		{codes.FailedPrecondition, "read-only"},
		{codes.FailedPrecondition, "not the owner"},
		{codes.InvalidArgument, "must carry coord_term"},
		{codes.FailedPrecondition, "stale coordinator term"},
		{codes.Unavailable, "not confirmed by coordd"},
		{codes.FailedPrecondition, "wrong node"},
		{codes.InvalidArgument, ""},
	} {
		wantItem(t, i, res[i], want.code, want.substr)
	}
	if a, b := res[0].Response.Id, res[1].Response.Id; a.Term != 2 || b.Term != 2 || a.Offset == b.Offset {
		t.Fatalf("two items on dml_0: %v and %v", a, b)
	}
	if st := n1.Status(); st.MaxCoordTerm != 3 {
		t.Fatalf("max coord term %d after a batch with a forged term", st.MaxCoordTerm)
	}
	// A retried batch (the broadcaster's next step) finds every record.
	again := n1.appendBatch(t, items[:3]...)
	for i, r := range again {
		wantItem(t, i, r, codes.OK, "")
		if !r.Response.Duplicate || r.Response.Id.Offset != res[i].Response.Id.Offset || r.Response.Timestamp != res[i].Response.Timestamp {
			t.Fatalf("retried item %d: %v, first %v", i, r.Response, res[i].Response)
		}
	}
	// n2 takes dml_0 at term 3 in the shared directory; n1 was not told.
	if err := n2.assign(t, pch, 3, 3); err != nil {
		t.Fatal(err)
	}
	res = n1.appendBatch(t, n1.batchItem(vch, 2, "fenced", 78, 3), n1.batchItem("dml_1_5v0", 2, "c", 78, 3))
	wantItem(t, 0, res[0], codes.FailedPrecondition, "fenced")
	wantItem(t, 1, res[1], codes.OK, "")
	if got := payloadsOf(n1.readAll(t, vch, 0)); got != "b" {
		t.Fatalf("dml_0's log holds %q", got)
	}
	if got := payloadsOf(n1.readAll(t, "dml_1_5v0", 0)); got != "b,c" {
		t.Fatalf("dml_1's log holds %q", got)
	}
	for _, v := range []string{"dml_1_6v0", "dml_1_7v0", "dml_1_8v0", "dml_1_9v0", "dml_1_10v0"} {
		if got := n1.readAll(t, v, 0); len(got) != 0 {
			t.Fatalf("refused item %s was written: %v", v, got)
		}
	}
}

// TestAppendBatchPChannelsDoNotWaitForEachOther: an item whose PChannel's
// slot is busy does not hold up another PChannel's item of the same batch,
// and items on one PChannel share fdatasyncs (the WAL's group commit). A
// batch that appended its items one after another would write neither
// before the busy slot is let go, and sync once per item.
func TestAppendBatchPChannelsDoNotWaitForEachOther(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	for _, p := range []string{"dml_0", "dml_1"} {
		if err := n.assign(t, p, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	busy := n.slotFor("dml_0", false)
	busy.mu.Lock()
	held := true
	release := func() {
		if held {
			held = false
			busy.mu.Unlock()
		}
	}
	t.Cleanup(release) // before the node is killed, should the test fail
	done := make(chan []*coordpb.AppendBatchResult, 1)
	go func() {
		resp, err := n.cl.AppendBatch(context.Background(), &coordpb.AppendBatchRequest{Items: []*coordpb.AppendRequest{
			n.batchItem("dml_0_1v0", 2, "a", 5, 3), n.batchItem("dml_1_1v0", 2, "b", 5, 3)}})
		if err != nil {
			t.Errorf("AppendBatch: %v", err)
		}
		done <- resp.GetResults()
	}()
	testutil.Eventually(t, "dml_1's item written while dml_0's slot is busy", func() bool {
		return len(n.readAll(t, "dml_1_1v0", 0)) == 1
	})
	select {
	case <-done:
		t.Fatal("the batch returned while one of its PChannels' slot was held")
	default:
	}
	release()
	res := <-done
	for i, r := range res {
		wantItem(t, i, r, codes.OK, "")
	}

	sl := n.slotFor("dml_1", false)
	sl.mu.Lock()
	before := sl.w.Syncs()
	sl.mu.Unlock()
	var items []*coordpb.AppendRequest
	for i := 0; i < 32; i++ {
		items = append(items, n.batchItem(fmt.Sprintf("dml_1_%dv0", 100+i), 2, "s", 6, 3))
	}
	for i, r := range n.appendBatch(t, items...) {
		wantItem(t, i, r, codes.OK, "")
	}
	sl.mu.Lock()
	syncs := sl.w.Syncs() - before
	sl.mu.Unlock()
	if syncs >= uint64(len(items)) {
		t.Fatalf("%d fdatasyncs for a batch of %d items on one PChannel: none shared", syncs, len(items))
	}
	t.Logf("%d items on one PChannel, %d fdatasyncs", len(items), syncs)
}

// TestAppendBatchIsCoorddsCall: on a secure node an AppendBatch is
// refused whole (PermissionDenied naming coordd's server identity, nothing
// written) for a caller without coordd's server certificate: none, a
// proxy's (which may Append on the data path) or a streaming node's;
// coordd's own certificate is admitted.
func TestAppendBatchIsCoorddsCall(t *testing.T) {
	n := startSecureNode(t)
	pki, coordd, nodeMat, load, dial := n.pki, n.coordd, n.node, n.load, n.dial
	n.cl = dial(coordd) // Assign is coordd's call too
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	anon := load(security.Files{CA: pki.Server.CA})
	req := &coordpb.AppendBatchRequest{Items: []*coordpb.AppendRequest{n.batchItem(vch, 2, "x", 9, 3)}}
	for name, m := range map[string]*security.Material{"no client certificate": anon, "the proxy certificate": load(pki.Proxy),
		"another node's certificate": load(pki.Node(2)), "the node's own certificate": nodeMat} {
		_, err := dial(m).AppendBatch(context.Background(), req)
		wantErr(t, err, codes.PermissionDenied, security.ServerURI)
		t.Logf("%s: %v", name, err)
	}
	if got := n.readAll(t, vch, 0); len(got) != 0 {
		t.Fatalf("a refused batch was written: %v", got)
	}
	res := n.appendBatch(t, req.Items...)
	wantItem(t, 0, res[0], codes.OK, "")
}
