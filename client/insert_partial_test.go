package client_test

import (
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
	"github.com/coordd/coordd/vocab"
)

// Review D3 and D7 with real gRPC: one streaming node takes inserts, the
// other is "paused" — its port accepts connections and never answers, as a
// SIGSTOPped process does. The insert fails, and its error says how much
// was written, names the PChannel, its owner and state, what coordd will do
// (a move only when another node is UP), and when the wait truly began.

// takingNode is a streaming node that acknowledges every insert.
type takingNode struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	mu   sync.Mutex
	rows int
}

func (s *takingNode) Insert(_ context.Context, req *coordpb.InsertRequest) (*coordpb.InsertResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rows += len(req.Pks)
	return &coordpb.InsertResponse{}, nil
}

func startTakingNode(t *testing.T) (string, *takingNode) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sn := &takingNode{}
	coordpb.RegisterStreamingNodeServiceServer(srv, sn)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), sn
}

// startPausedNode accepts connections and holds them without a byte of
// HTTP/2, like a process stopped with SIGSTOP (the kernel still accepts).
func startPausedNode(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return lis.Addr().String()
}

var waitedFrom = regexp.MustCompile(`waited from (\d\d:\d\d:\d\d\.\d\d\d), gave up after ([0-9.]+m?s)`)

// insertOnPausedOwner runs a 10-row insert into a 2-VChannel collection
// whose second PChannel is owned by a paused node; with a live first
// node when withTaker is set. It returns the error text, the result and
// when the call began.
func insertOnPausedOwner(t *testing.T, withTaker bool) (string, *client.InsertResult, time.Time) {
	fc := clienttest.Start(t, 1)
	paused := startPausedNode(t)
	taker, sn := startTakingNode(t)
	st := clienttest.ChannelState{
		PChannels: []*coordpb.PChannel{
			{Name: "by-dev-rootcoord-dml_0", Term: 1, State: "ASSIGNED", NodeId: 1, NodeAddress: taker},
			{Name: "by-dev-rootcoord-dml_1", Term: 1, State: "ASSIGNED", NodeId: 2, NodeAddress: paused},
		},
		Nodes: []*coordpb.StreamingNode{
			{Id: 2, Address: paused, State: "UP", Epoch: 4, LastHeartbeatMsAgo: 300, NodeTtlMs: 10000},
		},
	}
	if withTaker {
		st.Nodes = append(st.Nodes, &coordpb.StreamingNode{Id: 1, Address: taker, State: "UP", Epoch: 3, LastHeartbeatMsAgo: 100, NodeTtlMs: 10000})
	} else {
		st.PChannels = st.PChannels[1:]
	}
	fc.SetChannelState(st)
	c, err := client.New(context.Background(), client.Config{Endpoints: fc.Endpoints(), RequestTimeout: 2 * time.Second, AttemptTimeout: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	shards := uint32(2)
	if !withTaker {
		shards = 1
	}
	if _, err := c.AllocVirtualChannels(context.Background(), 100, shards, "r1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	res, err := c.Insert(ctx, 100, 0, 10, 0)
	if err == nil {
		t.Fatal("an insert into a paused node's pchannel succeeded")
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if withTaker && sn.rows != 5 {
		t.Fatalf("the live node took %d rows, want 5", sn.rows)
	}
	t.Logf("error: %s", status.Convert(err).Message())
	return status.Convert(err).Message(), res, began
}

// checkWaitedFrom: the wait's start is the call's (not after a first
// attempt that hung: 1.5 s), and its length is the whole wait.
func checkWaitedFrom(t *testing.T, msg string, began time.Time) {
	t.Helper()
	m := waitedFrom.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no 'waited from ..., gave up after ...' in %q", msg)
	}
	clock, err := time.ParseInLocation("15:04:05.000", m[1], time.Local)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(began.Year(), began.Month(), began.Day(), clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), time.Local)
	if d := from.Sub(began); d < -time.Millisecond || d > 250*time.Millisecond {
		t.Fatalf("waited from %s, but the call began at %s (%v apart): %q", m[1], began.Format("15:04:05.000"), d, msg)
	}
	waited, err := time.ParseDuration(m[2])
	if err != nil {
		t.Fatal(err)
	}
	if waited < time.Since(began)-250*time.Millisecond {
		t.Fatalf("gave up after %v, but the call took %v: %q", waited, time.Since(began), msg)
	}
}

func TestInsertPartlyWrittenOnPausedOwner(t *testing.T) {
	msg, res, began := insertOnPausedOwner(t, true)
	v0, v1 := vocab.VChannelName("by-dev-rootcoord-dml_0", 100, 0), vocab.VChannelName("by-dev-rootcoord-dml_1", 100, 1)
	for _, want := range []string{
		"vchannel " + v1 + ": pchannel by-dev-rootcoord-dml_1 (ASSIGNED): its owner streaming node 2 (",
		", UP) did not answer in time",
		"so coordd marks it DOWN and moves the pchannel at about",
		"partly written: 5 of 10 rows",
		"vchannels " + v0 + " in full",
		"not acknowledged: " + v1 + " (0 of 5 rows; failed)",
		"running the insert again writes all 10 rows again under new primary keys",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	checkWaitedFrom(t, msg, began)
	if res == nil || res.Acknowledged != 5 || len(res.Unacknowledged) != 1 || res.Unacknowledged[0] != v1 {
		t.Fatalf("result %+v", res)
	}
}

func TestInsertPausedOnlyNodePromisesNoMove(t *testing.T) {
	msg, res, began := insertOnPausedOwner(t, false)
	for _, want := range []string{
		"pchannel by-dev-rootcoord-dml_1 (ASSIGNED): its owner streaming node 2 (",
		"did not answer in time",
		"coordd marks it DOWN at about",
		"no other streaming node is UP, so the pchannel cannot move",
		"none of the 10 rows",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "moves the pchannel") || strings.Contains(msg, "moving it") {
		t.Errorf("error promises a move with no node to move to:\n%s", msg)
	}
	checkWaitedFrom(t, msg, began)
	if res == nil || res.Acknowledged != 0 {
		t.Fatalf("result %+v", res)
	}
}
