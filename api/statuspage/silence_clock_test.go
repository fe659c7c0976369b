package statuspage_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/apitest"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/grpcserver"
	"github.com/coordd/coordd/api/statuspage"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/controller/nodehealth"
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/testutil"
)

// The whole chain on one real member, time on a fake clock: the leader's
// tracker judges a streaming node by the interval it declares, the API
// reports it, and the page turns degraded exactly when the heartbeat is
// two intervals late, counts the TTL down, and shows the node DOWN with
// red rows once the tracker marks it so.
func TestPageFollowsTheLeadersClock(t *testing.T) {
	clock := controllertest.NewClock()
	var srv *grpcserver.Server
	n := apitest.StartT(t, apitest.Config{
		Routines: routines.Config{NodeHealth: nodehealth.Config{TTL: 10 * time.Second, Clock: clock}},
		Serve: func(n *apitest.Node) (apitest.Services, error) {
			srv = grpcserver.New(n.Raft, n.Self, n.Logger.Named("api"), n.Routines)
			return apitest.Services{Register: srv.Register, Close: srv.Close}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(30*time.Second))
	defer cancel()
	propose := func(body proto.Message) {
		t.Helper()
		c, err := commands.New(body, "")
		if err != nil {
			t.Fatal(err)
		}
		if res, err := n.Raft.Propose(ctx, c); err != nil || res.Rejection != nil {
			t.Fatalf("%s: %v %v", c.Type, err, res.GetRejection())
		}
	}
	propose(&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{"dml_0", "dml_1"}})
	reg, err := coordpb.NewStreamingNodeRegistryClient(n.Conn).RegisterStreamingNode(ctx,
		&coordpb.RegisterStreamingNodeRequest{Address: "127.0.0.1:7202", Incarnation: "sn2"})
	if err != nil {
		t.Fatal(err)
	}
	propose(&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
		{Pchannel: "dml_0", NodeId: reg.NodeId, ExpectedTerm: 1}, {Pchannel: "dml_1", NodeId: reg.NodeId, ExpectedTerm: 1}}})
	propose(&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "dml_0", Term: 2}, {Pchannel: "dml_1", Term: 2}}})
	if _, err := coordpb.NewStreamingNodeRegistryClient(n.Conn).Heartbeat(ctx, &coordpb.HeartbeatRequest{NodeId: reg.NodeId, Epoch: reg.Epoch,
		SeenVersion: reg.RegisteredVersion, HeartbeatIntervalMs: 1000}); err != nil {
		t.Fatal(err)
	}
	h := statuspage.Handler{Source: srv, Now: clock.Now}
	page := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui?refresh=0", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	verdict := regexp.MustCompile(`data-verdict="(\w+)"><b>\w+</b>([^<]*)`)
	level := func(body string) (string, string) {
		m := verdict.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no verdict on the page:\n%s", body)
		}
		return m[1], m[2]
	}
	if l, why := level(page()); l != "healthy" {
		t.Fatalf("right after a heartbeat: %s%s", l, why)
	}
	clock.Advance(2 * time.Second) // two intervals: late, not yet silent
	if l, why := level(page()); l != "healthy" {
		t.Fatalf("exactly two intervals after the heartbeat: %s%s", l, why)
	}
	clock.Advance(500 * time.Millisecond)
	body := page()
	l, why := level(body)
	want := "streaming node 1 (127.0.0.1:7202) silent for 2.5s (no heartbeat; silent after 2s): 2 pchannel(s) cannot take writes (dml_0, dml_1); " +
		"coordd marks it DOWN and moves them when its 10s TTL runs out, in 7.5s"
	if l != "unavailable" || !strings.Contains(why, "no streaming node is UP and heartbeating (1 silent)") || !strings.Contains(why, want) {
		t.Fatalf("2.5s after the heartbeat of the only node: %s%s\nwant unavailable naming %s", l, why, want)
	}
	if !strings.Contains(body, `data-state="ASSIGNED" class="bad" data-owner-state="SILENT"`) {
		t.Fatal("rows under the silent node are not red")
	}
	// A heartbeat ends the silence.
	if _, err := coordpb.NewStreamingNodeRegistryClient(n.Conn).Heartbeat(ctx, &coordpb.HeartbeatRequest{NodeId: reg.NodeId, Epoch: reg.Epoch,
		SeenVersion: reg.RegisteredVersion, HeartbeatIntervalMs: 1000}); err != nil {
		t.Fatal(err)
	}
	if l, why := level(page()); l != "healthy" {
		t.Fatalf("after a new heartbeat: %s%s", l, why)
	}
	// Silent past the TTL: the tracker marks the node DOWN, the rows say so.
	clock.Advance(10*time.Second + time.Millisecond)
	testutil.Eventually(t, "the page to show node 1 DOWN", func() bool {
		clock.Advance(10 * time.Millisecond) // wakes the tracker's ticker
		return strings.Contains(page(), `data-state="ASSIGNED" class="bad" data-owner-state="DOWN"`)
	})
	if l, why := level(page()); l != "unavailable" || !strings.Contains(why, "streaming node 1 (127.0.0.1:7202) is DOWN holding 2 pchannel(s)") {
		t.Fatalf("after the TTL: %s%s", l, why)
	}
}
