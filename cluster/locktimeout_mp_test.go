package cluster_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/testutil"
)

// TestLockTimeoutSurvivesForwarding: on a three-member cluster without
// streaming nodes, a broadcast holding the exclusive key of collection
// db:held never completes. A second broadcast on that key, sent to a
// follower over gRPC and over HTTP, is forwarded to the leader, whose lock
// wait gives up before the caller's deadline: the caller gets the lock
// timeout as the leader reports it (DeadlineExceeded / 504 naming the
// key, not "outcome unknown"), just as a caller of the leader does, and no
// second task is created.
func TestLockTimeoutSurvivesForwarding(t *testing.T) {
	const keyName = "CollectionName:db:held@X"
	l := startClusterWith(t, cluster.LauncherConfig{})
	cs := dialAll(t, l)
	li := leaderIndex(t, l, cs, -1)
	fi := (li + 1) % 3
	follower := l.Members()[fi]
	held := func() *coordpb.BroadcastRequest {
		return &coordpb.BroadcastRequest{MessageType: "CreateIndex",
			ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "db:held"}}}
	}

	// The holder: its caller gives up; the task stays pending, holding
	// the key, since no streaming node will ever append it.
	hctx, hcancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := coordpb.NewBroadcasterClient(cs.conns[li]).Broadcast(hctx, held())
	hcancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("the holder broadcast: %v, want its caller's deadline to pass", err)
	}
	pending := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		// Any member answers (a forwarded linearizable read); an election on
		// a loaded machine (Unavailable) moves on to the next one.
		resp, err := anyMember(ctx, cs, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.ListBroadcastsResponse, error) {
			return coordpb.NewBroadcasterClient(conn).ListBroadcasts(ctx, &coordpb.ListBroadcastsRequest{PendingOnly: true})
		})
		if err != nil {
			t.Fatalf("list broadcasts: %v", err)
		}
		return len(resp.Broadcasts)
	}
	testutil.Eventually(t, "the holder's task to be pending", func() bool { return pending() == 1 })

	// gRPC, through the follower and, for comparison, the leader.
	for _, tc := range []struct {
		name string
		conn *grpc.ClientConn
	}{{"follower " + follower.ID, cs.conns[fi]}, {"leader " + l.Members()[li].ID, cs.conns[li]}} {
		// The leader's lock wait ends a tenth of the remaining time before
		// the deadline, so the answer naming the key beats it.
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(3*time.Second))
		var trailer metadata.MD
		start := time.Now()
		_, err := coordpb.NewBroadcasterClient(tc.conn).Broadcast(ctx, held(), grpc.Trailer(&trailer))
		cancel()
		st, _ := status.FromError(err)
		t.Logf("%s: %v after %v", tc.name, err, time.Since(start))
		if st.Code() != codes.DeadlineExceeded || !strings.Contains(st.Message(), keyName) || !strings.Contains(st.Message(), "waited") {
			t.Fatalf("through the %s: %v; want DeadlineExceeded naming the key %s", tc.name, err, keyName)
		}
		if v := trailer.Get(grpcserver.MDOutcome); len(v) > 0 {
			t.Fatalf("through the %s: a lock timeout is marked outcome %v; nothing was proposed", tc.name, v)
		}
	}

	// HTTP, through the follower's gateway (its own call deadline, 10s).
	hc := httpClient(20 * time.Second)
	body := `{"message_type":"CreateIndex","resource_keys":[{"domain":"COLLECTION_NAME","key":"db:held"}]}`
	req, err := http.NewRequest(http.MethodPost, memberURL(l, follower.HTTPAddr, "/v1/broadcasts"), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/broadcasts through the follower: %v", err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal(data, &eb)
	if resp.StatusCode != http.StatusGatewayTimeout || eb.Error.Code != codes.DeadlineExceeded.String() || !strings.Contains(eb.Error.Message, keyName) {
		t.Fatalf("POST /v1/broadcasts through the follower: %d %s; want 504 DeadlineExceeded naming %s", resp.StatusCode, data, keyName)
	}

	if n := pending(); n != 1 {
		t.Fatalf("%d pending tasks after the timed-out broadcasts, want only the holder", n)
	}
}
