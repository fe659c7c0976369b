package streamingnode

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/testutil"
)

const (
	pch = "dml_0"
	vch = "dml_0_100v0"
	cch = "dml_0_vcchan"
)

type testNode struct {
	*Node
	f  *fakeCoord
	cl coordpb.StreamingNodeServiceClient
}

func startNode(t testing.TB, f *fakeCoord, walDir string, mod func(*Config)) *testNode {
	t.Helper()
	cfg := Config{
		Coord: []string{f.addr}, Addr: "127.0.0.1:0", WALDir: walDir, DataDir: t.TempDir(),
		ResourceGroup: "rg1", HeartbeatInterval: 20 * time.Millisecond, DrainTimeout: 5 * time.Second,
		RPCTimeout: time.Second,
		Logger:     hclog.New(&hclog.LoggerOptions{Name: "sn", Level: hclog.Warn, Output: testWriter{t}}),
	}
	if mod != nil {
		mod(&cfg)
	}
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.WaitRegistered(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(n.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testNode{Node: n, f: f, cl: coordpb.NewStreamingNodeServiceClient(conn)}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// wantErr checks a gRPC error's code and that its message contains substr.
func wantErr(t *testing.T, err error, code codes.Code, substr string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), substr) {
		t.Fatalf("got %v, want %v containing %q", err, code, substr)
	}
}

// assign does what coordd does: it raises its own term to coordTerm (a new
// leader) and records p at term on this node in the assignment view when
// that is newer than the view's, then sends Assign to this node.
func (n *testNode) assign(t testing.TB, p string, term int64, coordTerm uint64) error {
	t.Helper()
	return n.assignMode(t, p, term, coordTerm, "RW")
}

func (n *testNode) assignMode(t testing.TB, p string, term int64, coordTerm uint64, mode string) error {
	t.Helper()
	n.f.mu.Lock()
	raise := coordTerm > n.f.coordTerm
	newer := n.f.channels[p] == nil || term > n.f.channels[p].Term
	n.f.mu.Unlock()
	if raise {
		n.f.setCoordTerm(coordTerm)
	}
	id, epoch := n.Session()
	if newer {
		n.f.setChannel(p, term, id)
	}
	_, err := n.cl.Assign(context.Background(), &coordpb.AssignRequest{Pchannel: p, Term: term, AccessMode: mode, CoordTerm: coordTerm,
		NodeId: id, Epoch: epoch})
	return err
}

// remove does what coordd does: it commits a newer term for p in the
// assignment view (coordd removes only terms it has moved on from), then
// sends Remove to this node.
func (n *testNode) remove(t *testing.T, p string, term int64, coordTerm uint64) error {
	t.Helper()
	n.f.mu.Lock()
	cur := n.f.channels[p]
	n.f.mu.Unlock()
	if cur == nil || cur.Term <= term {
		var node uint64
		if cur != nil {
			node = cur.NodeId
		}
		n.f.setChannel(p, term+1, node)
	}
	id, epoch := n.Session()
	_, err := n.cl.Remove(context.Background(), &coordpb.RemoveRequest{Pchannel: p, Term: term, CoordTerm: coordTerm, NodeId: id, Epoch: epoch})
	return err
}

func (n *testNode) append(v string, term int64, payload string, bid uint64) (*coordpb.AppendResponse, error) {
	id, epoch := n.Session()
	return n.cl.Append(context.Background(), &coordpb.AppendRequest{Vchannel: v, Term: term, Payload: []byte(payload), BroadcastId: bid,
		NodeId: id, Epoch: epoch})
}

func (n *testNode) mustAppend(t *testing.T, v string, term int64, payload string) *coordpb.AppendResponse {
	t.Helper()
	resp, err := n.append(v, term, payload, 0)
	if err != nil {
		t.Fatalf("append %q: %v", payload, err)
	}
	return resp
}

func (n *testNode) heldTerm(p string) (int64, bool) {
	for _, w := range n.Status().Wals {
		if w.Pchannel == p {
			return w.Term, true
		}
	}
	return 0, false
}

// readAll reads vchannel from offset through the node's Read RPC.
func (n *testNode) readAll(t *testing.T, v string, from uint64) []*coordpb.WALMessage {
	t.Helper()
	stream, err := n.cl.Read(context.Background(), &coordpb.ReadRequest{Vchannel: v, FromOffset: from})
	if err != nil {
		t.Fatal(err)
	}
	var out []*coordpb.WALMessage
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		out = append(out, m)
	}
}

func payloadsOf(ms []*coordpb.WALMessage) string {
	var s []string
	for _, m := range ms {
		s = append(s, string(m.Payload))
	}
	return strings.Join(s, ",")
}

func TestRegisterAndHeartbeat(t *testing.T) {
	f := startFakeCoord(t)
	// A dead endpoint first: the node moves on to the live one.
	dead, _ := netListenClosed(t)
	n := startNode(t, f, t.TempDir(), func(c *Config) { c.Coord = []string{dead, f.addr} })
	id, epoch := n.Session()
	if id == 0 || epoch == 0 {
		t.Fatalf("session %d/%d", id, epoch)
	}
	fn := f.node(id)
	if fn.addr != n.Addr() || fn.rg != "rg1" || fn.inc == "" {
		t.Fatalf("registered %+v, node addr %s", fn, n.Addr())
	}
	// Heartbeats carry the version seen on the assignment stream.
	testutil.Eventually(t, "heartbeats with the seen version", func() bool {
		fn := f.node(id)
		return fn.heartbeats >= 3 && fn.seen.GetGlobal() == 3 && fn.seen.GetLocal() >= 2
	})
	f.push(&coordpb.Version{Global: 4, Local: 0})
	testutil.Eventually(t, "newer version", func() bool { return f.node(id).seen.GetGlobal() == 4 })
	// Older and equal versions are ignored.
	f.push(&coordpb.Version{Global: 3, Local: 99})
	f.push(&coordpb.Version{Global: 4, Local: 0})
	time.Sleep(60 * time.Millisecond)
	st, err := n.cl.Status(context.Background(), &coordpb.NodeStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The assignment stream's Global version is coordd's term: it is
	// confirmed like a heartbeat's coord_term.
	if st.NodeId != id || st.Epoch != epoch || st.Address != n.Addr() || st.MaxCoordTerm != 4 ||
		st.SeenVersion.GetGlobal() != 4 || st.SeenVersion.GetLocal() != 0 {
		t.Fatalf("status %v", st)
	}
	data, err := os.ReadFile(filepath.Join(n.cfg.DataDir, "identity.json"))
	if err != nil || !strings.Contains(string(data), fmt.Sprintf(`"node_id": %d`, id)) {
		t.Fatalf("identity file: %s %v", data, err)
	}
}

// netListenClosed returns an address nothing listens on.
func netListenClosed(t *testing.T) (string, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr, nil
}

func TestReRegisterAfterNotFound(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	id, _ := n.Session()
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.heldTerm(pch); !ok {
		t.Fatal("WAL not held after Assign")
	}
	oldInc := f.node(id).inc
	f.markDown(id)
	testutil.Eventually(t, "a new registration", func() bool {
		nid, _ := n.Session()
		return nid != 0 && nid != id
	})
	nid, _ := n.Session()
	if f.node(nid).inc == oldInc {
		t.Fatal("re-registration reused the incarnation")
	}
	if _, ok := n.heldTerm(pch); ok {
		t.Fatal("WAL still held after the session was lost")
	}
	_, err := n.append(vch, 0, "x", 0)
	wantErr(t, err, codes.FailedPrecondition, "not the owner")
	testutil.Eventually(t, "heartbeats of the new session", func() bool { return f.node(nid).heartbeats > 0 })
}

func TestAssignRemoveFencing(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	// The heartbeat taught the node coordinator term 3.
	testutil.Eventually(t, "coord term from heartbeat", func() bool { return n.Status().MaxCoordTerm == 3 })
	wantErr(t, n.assign(t, pch, 2, 2), codes.FailedPrecondition, "stale coordinator term")
	if err := n.assign(t, pch, 2, 5); err != nil {
		t.Fatal(err)
	}
	if err := n.assign(t, pch, 2, 5); err != nil { // idempotent
		t.Fatalf("repeat assign: %v", err)
	}
	wantErr(t, n.assign(t, pch, 3, 4), codes.FailedPrecondition, "stale coordinator term")
	wantErr(t, n.assign(t, pch, 1, 5), codes.FailedPrecondition, "stale pchannel term")
	// Removing an older term than held is a no-op.
	if err := n.remove(t, pch, 1, 5); err != nil {
		t.Fatal(err)
	}
	if term, ok := n.heldTerm(pch); !ok || term != 2 {
		t.Fatalf("held %d %v", term, ok)
	}
	wantErr(t, n.remove(t, pch, 2, 4), codes.FailedPrecondition, "stale coordinator term")
	if err := n.assign(t, pch, 4, 6); err != nil { // a newer term replaces the WAL
		t.Fatal(err)
	}
	if term, _ := n.heldTerm(pch); term != 4 {
		t.Fatalf("held term %d", term)
	}
	if fence, _ := wal.ReadFence(n.cfg.WALDir, pch); fence != 4 {
		t.Fatalf("fence %d", fence)
	}
	if err := n.remove(t, pch, 4, 6); err != nil {
		t.Fatal(err)
	}
	if _, ok := n.heldTerm(pch); ok {
		t.Fatal("still held after Remove")
	}
	if err := n.remove(t, pch, 4, 6); err != nil { // not held: success
		t.Fatal(err)
	}
	f.setChannel("dml_7", 1, 99)
	if err := n.remove(t, "dml_7", 1, 6); err != nil { // never held
		t.Fatal(err)
	}
	// An older term than coordd's view holds cannot open.
	wantErr(t, n.assign(t, pch, 3, 6), codes.FailedPrecondition, "stale pchannel term")
	// A coordinator term learned from a heartbeat fences too.
	f.setCoordTerm(9)
	testutil.Eventually(t, "coord term 9", func() bool { return n.Status().MaxCoordTerm == 9 })
	wantErr(t, n.assign(t, pch, 5, 8), codes.FailedPrecondition, "stale coordinator term")
	// Bad input.
	wantErr(t, n.assign(t, "../x_1", 5, 9), codes.InvalidArgument, "")
	wantErr(t, n.assign(t, pch, 0, 9), codes.InvalidArgument, "term")
	wantErr(t, n.assignMode(t, pch, 5, 9, "XX"), codes.InvalidArgument, "access_mode")
}

func TestAppendOwnershipAndFencing(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n1 := startNode(t, f, dir, nil)
	n2 := startNode(t, f, dir, nil)
	_, err := n1.append(vch, 0, "nobody", 0)
	wantErr(t, err, codes.FailedPrecondition, "not the owner")
	if err := n1.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	_, err = n1.append(vch, 3, "wrong", 0)
	wantErr(t, err, codes.FailedPrecondition, "wrong term")
	r := n1.mustAppend(t, vch, 2, "n1-a")
	if r.Id.Term != 2 || r.Id.Offset != 0 || r.Timestamp == 0 {
		t.Fatalf("append: %v", r)
	}
	n1.mustAppend(t, cch, 0, "n1-c")
	_, err = n2.append(vch, 0, "n2-not-owner", 0)
	wantErr(t, err, codes.FailedPrecondition, "not the owner")

	// n2 opens the same pchannel at a higher term in the shared directory;
	// n1 has not been told and still believes it owns it.
	if err := n2.assign(t, pch, 3, 3); err != nil {
		t.Fatal(err)
	}
	_, err = n1.append(vch, 2, "n1-fenced", 0)
	wantErr(t, err, codes.FailedPrecondition, "fenced: pchannel dml_0 is at term 3, this writer holds term 2")
	if _, ok := n1.heldTerm(pch); ok {
		t.Fatal("n1 still lists the fenced WAL")
	}
	_, err = n1.append(vch, 0, "n1-after", 0)
	wantErr(t, err, codes.FailedPrecondition, "not the owner")
	r = n2.mustAppend(t, vch, 3, "n2-a")
	if r.Id.Term != 3 || r.Id.Offset != 2 {
		t.Fatalf("n2 append: %v", r)
	}
	// Either node reads the shared log; the fenced append is not in it.
	for _, n := range []*testNode{n1, n2} {
		if got := payloadsOf(n.readAll(t, vch, 0)); got != "n1-a,n2-a" {
			t.Fatalf("read %s: %q", n.Addr(), got)
		}
		if got := payloadsOf(n.readAll(t, cch, 0)); got != "n1-c" {
			t.Fatalf("read cchannel: %q", got)
		}
	}
	// Read-only WALs refuse appends.
	if err := n2.assignMode(t, "dml_1", 2, 3, "RO"); err != nil {
		t.Fatal(err)
	}
	_, err = n2.append("dml_1_5v0", 0, "ro", 0)
	wantErr(t, err, codes.FailedPrecondition, "read-only")
	_, err = n2.append("bad name", 0, "x", 0)
	wantErr(t, err, codes.InvalidArgument, "")
}

func TestAppendDedup(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	// A broadcast ID is coordd's: without a coordinator term it is refused,
	// on an insecure node too, and nothing is written.
	_, err := n.append(cch, 2, "ddl", 77)
	wantErr(t, err, codes.InvalidArgument, "without coord_term")
	bcast := func(v string) (*coordpb.AppendResponse, error) {
		return n.cl.Append(context.Background(), n.batchItem(v, 2, "ddl", 77, 3))
	}
	first, err := bcast(cch)
	if err != nil || first.Duplicate || first.Id.Offset != 0 {
		t.Fatalf("first: %v %v", first, err)
	}
	again, err := bcast(cch)
	if err != nil || !again.Duplicate || again.Id.Offset != first.Id.Offset || again.Timestamp != first.Timestamp {
		t.Fatalf("retry: %v %v (first %v)", again, err, first)
	}
	other, err := bcast(vch)
	if err != nil || other.Duplicate {
		t.Fatalf("other vchannel: %v %v", other, err)
	}
}

func TestTimestampsIncrease(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n1 := startNode(t, f, dir, func(c *Config) { c.TimestampBatch = 8 })
	n2 := startNode(t, f, dir, func(c *Config) { c.TimestampBatch = 64 })
	for _, a := range []struct {
		n *testNode
		p string
	}{{n1, "dml_0"}, {n1, "dml_1"}, {n2, "dml_2"}} {
		if err := a.n.assign(t, a.p, 2, 3); err != nil {
			t.Fatal(err)
		}
	}
	// n2 takes a batch of 64 now; n1 then goes far past it on dml_0.
	n2.mustAppend(t, "dml_2_1v0", 0, "n2")
	var last uint64
	for i := 0; i < 100; i++ {
		p := []string{"dml_0_1v0", "dml_1_1v0"}[i%2]
		r := n1.mustAppend(t, p, 0, fmt.Sprint(i))
		if r.Timestamp <= last {
			t.Fatalf("timestamp %d after %d", r.Timestamp, last)
		}
		last = r.Timestamp
	}
	f.mu.Lock()
	calls := f.tsCalls
	f.mu.Unlock()
	if calls > 1+100/8+2 {
		t.Fatalf("%d TSO calls for 101 appends: not batched", calls)
	}
	// n2 takes dml_0 over; its held batch is older than dml_0's last
	// timestamp, so it must fetch a fresh one.
	if err := n2.assign(t, "dml_0", 3, 3); err != nil {
		t.Fatal(err)
	}
	r := n2.mustAppend(t, "dml_0_1v0", 0, "n2-takeover")
	if r.Timestamp <= last {
		t.Fatalf("takeover timestamp %d not above %d", r.Timestamp, last)
	}
	msgs := n2.readAll(t, "dml_0_1v0", 0)
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Timestamp <= msgs[i-1].Timestamp {
			t.Fatalf("log timestamps not increasing at %d", i)
		}
	}
}

func TestReadStreamsAndFollows(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n := startNode(t, f, dir, nil)
	reader := startNode(t, f, dir, nil) // holds nothing
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		n.mustAppend(t, vch, 0, fmt.Sprintf("m%d", i))
		n.mustAppend(t, "dml_0_200v0", 0, fmt.Sprintf("other%d", i))
	}
	msgs := reader.readAll(t, vch, 0)
	if payloadsOf(msgs) != "m0,m1,m2" || msgs[1].Id.Offset != 2 || msgs[1].Vchannel != vch || msgs[1].Id.Term != 2 {
		t.Fatalf("read: %v", msgs)
	}
	if got := payloadsOf(reader.readAll(t, vch, 3)); got != "m2" {
		t.Fatalf("read from 3: %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := reader.cl.Read(ctx, &coordpb.ReadRequest{Vchannel: vch, FromOffset: 2, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() string {
		m, err := stream.Recv()
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		return string(m.Payload)
	}
	if a, b := recv(), recv(); a != "m1" || b != "m2" {
		t.Fatalf("follow backlog: %s %s", a, b)
	}
	appended := make(chan error, 1)
	go func() {
		time.Sleep(30 * time.Millisecond)
		_, err := n.append(vch, 0, "m3", 0)
		if err == nil {
			_, err = n.append(vch, 0, "m4", 0)
		}
		appended <- err
	}()
	if a, b := recv(), recv(); a != "m3" || b != "m4" {
		t.Fatalf("follow new: %s %s", a, b)
	}
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
}

func TestControlledShutdown(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	id, _ := n.Session()
	other := startNode(t, f, t.TempDir(), nil) // somewhere for the channels to go
	oid, _ := other.Session()
	testutil.Eventually(t, "the other node in the assignment view", func() bool { return n.otherNodeUp(id) })
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.drainLeft, f.held = 2, []string{pch}
	f.mu.Unlock()
	// A following reader must not hold the shutdown up.
	stream, err := n.cl.Read(context.Background(), &coordpb.ReadRequest{Vchannel: vch, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := n.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 4*time.Second {
		t.Fatalf("shutdown took %v (two polls 200 ms apart expected)", d)
	}
	if got := sessionCalls(f); got != "drain,drain,drain,deregister" {
		t.Fatalf("calls %v", got)
	}
	if !f.node(id).down || f.node(oid).down {
		t.Fatal("node not deregistered")
	}
	hb := f.node(id).heartbeats
	time.Sleep(60 * time.Millisecond)
	if f.node(id).heartbeats != hb {
		t.Fatal("heartbeats after shutdown")
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("follow stream still open")
	}
	if len(n.Status().Wals) != 0 {
		t.Fatal("WALs still open")
	}
	if _, err := n.cl.Status(context.Background(), &coordpb.NodeStatusRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("server still serving: %v", err)
	}
	select {
	case <-n.Done():
	default:
		t.Fatal("Done not closed")
	}
}

func sessionCalls(f *fakeCoord) string {
	var got []string
	for _, c := range f.callLog() {
		if c != "register" {
			got = append(got, c)
		}
	}
	return strings.Join(got, ",")
}

func TestShutdownDoesNotWaitWithoutAnotherNode(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	id, _ := n.Session()
	testutil.Eventually(t, "own registration in the assignment view", func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		_, ok := n.liveNodes[id]
		return ok
	})
	f.mu.Lock()
	f.drainLeft, f.held = 100, []string{pch}
	f.mu.Unlock()
	start := time.Now()
	n.Shutdown(context.Background())
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	if got := sessionCalls(f); got != "drain,deregister" {
		t.Fatalf("calls %s", got)
	}
}

func TestRunStopsOnContext(t *testing.T) {
	f := startFakeCoord(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, Config{Coord: []string{f.addr}, Addr: "127.0.0.1:0", WALDir: t.TempDir(),
			HeartbeatInterval: 20 * time.Millisecond, Logger: hclog.NewNullLogger()})
	}()
	// A heartbeat proves the node holds its session: the fake logs
	// "register" before the node has stored the answer, and a shutdown in
	// that window rightly has nothing to drain.
	testutil.Eventually(t, "first heartbeat", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, n := range f.nodes {
			if n.heartbeats > 0 {
				return true
			}
		}
		return false
	})
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	if got := strings.Join(f.callLog(), ","); got != "register,drain,deregister" {
		t.Fatalf("calls %s", got)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{Addr: "127.0.0.1:0", WALDir: "x"},
		{Coord: []string{"nohost"}, Addr: "127.0.0.1:0", WALDir: "x"},
		{Coord: []string{"127.0.0.1:1"}, Addr: ":7000", WALDir: "x"},
		{Coord: []string{"127.0.0.1:1"}, Addr: "127.0.0.1:0"},
	} {
		if _, err := Start(c); err == nil {
			t.Errorf("Start(%+v) succeeded", c)
		}
	}
}
