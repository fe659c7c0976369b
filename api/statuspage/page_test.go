package statuspage

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// cannedSource answers with fixed responses: these tests are about what
// the page makes of answers (the live cluster test in cluster/ is about
// real ones).
type cannedSource struct {
	status   *coordpb.StatusResponse
	pcs      *coordpb.ListPChannelsResponse
	nodes    *coordpb.ListNodesResponse
	bcasts   *coordpb.ListBroadcastsResponse
	segs     *coordpb.ListSegmentsResponse
	cps      *coordpb.ListChannelCheckpointsResponse
	segsFail error
}

func (c cannedSource) Status(context.Context, *coordpb.StatusRequest) (*coordpb.StatusResponse, error) {
	return c.status, nil
}
func (c cannedSource) ListPChannels(_ context.Context, r *coordpb.ListPChannelsRequest) (*coordpb.ListPChannelsResponse, error) {
	if r.Consistency != coordpb.ReadConsistency_STALE {
		return nil, errors.New("page must read STALE")
	}
	return c.pcs, nil
}
func (c cannedSource) ListNodes(context.Context, *coordpb.ListNodesRequest) (*coordpb.ListNodesResponse, error) {
	return c.nodes, nil
}
func (c cannedSource) ListBroadcasts(_ context.Context, r *coordpb.ListBroadcastsRequest) (*coordpb.ListBroadcastsResponse, error) {
	if !r.PendingOnly {
		return nil, errors.New("page must list pending broadcasts only")
	}
	return c.bcasts, nil
}
func (c cannedSource) ListSegments(context.Context, *coordpb.ListSegmentsRequest) (*coordpb.ListSegmentsResponse, error) {
	if c.segsFail != nil {
		return nil, c.segsFail
	}
	return c.segs, nil
}
func (c cannedSource) ListChannelCheckpoints(context.Context, *coordpb.ListChannelCheckpointsRequest) (*coordpb.ListChannelCheckpointsResponse, error) {
	return c.cps, nil
}

var fixedNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func sample() cannedSource {
	return cannedSource{
		status: &coordpb.StatusResponse{NodeId: "n2", State: "Follower", LeaderId: "n1", Term: 7, CommitIndex: 90, AppliedIndex: 90,
			Members: []*coordpb.Member{
				{Id: "n1", Suffrage: "voter", Leader: true, HttpAddr: "127.0.0.1:1"},
				{Id: "n2", Suffrage: "voter", HttpAddr: "127.0.0.1:2"},
				{Id: "n3", Suffrage: "voter", HttpAddr: "127.0.0.1:3"},
			}},
		pcs: &coordpb.ListPChannelsResponse{Cchannel: "cc", Pchannels: []*coordpb.PChannel{
			{Name: "dml_0", Term: 4, State: "ASSIGNED", NodeId: 11, AccessMode: "RW"},
			{Name: "dml_1", Term: 5, State: "ASSIGNING", NodeId: 11, AccessMode: "RW"},
			{Name: "dml_2", Term: 3, State: "UNAVAILABLE", NodeId: 0, LastError: "node 12 <gone>", FailedAttempts: 2},
		}},
		nodes: &coordpb.ListNodesResponse{Nodes: []*coordpb.StreamingNode{{Id: 11, Address: "127.0.0.1:9", State: "UP", Epoch: 2, LastHeartbeatMsAgo: -1}}},
		bcasts: &coordpb.ListBroadcastsResponse{Broadcasts: []*coordpb.BroadcastInfo{
			{BroadcastId: 5, MessageType: "CreateCollection", State: "PENDING", Vchannels: []string{"a", "b"}, CreatedUnixMs: fixedNow.Add(-time.Minute).UnixMilli()},
			{BroadcastId: 6, MessageType: "DropCollection", State: "PENDING", LastError: "callback refused", CallbackAttempts: 3},
		}},
		segs: &coordpb.ListSegmentsResponse{Segments: []*coordpb.SegmentInfo{
			{SegmentId: 1, Vchannel: "v0", State: "Growing"}, {SegmentId: 2, Vchannel: "v0", State: "Flushed"}, {SegmentId: 3, Vchannel: "v0", State: "Flushed"},
		}},
		cps: &coordpb.ListChannelCheckpointsResponse{Checkpoints: []*coordpb.ChannelCheckpoint{
			{Vchannel: "v0", LagMs: 1500, Position: &coordpb.Position{Timestamp: 4242}},
			{Vchannel: "v1", LagMs: 20},
			{Vchannel: "gone", Dropped: true},
		}},
	}
}

func peers(ctx context.Context, addr string) (*coordpb.StatusResponse, error) {
	switch addr {
	case "127.0.0.1:1":
		return &coordpb.StatusResponse{State: "Leader", Term: 7, CommitIndex: 100, AppliedIndex: 100}, nil
	case "127.0.0.1:3":
		return nil, errors.New("connection refused")
	}
	return nil, errors.New("asked for an unexpected peer " + addr)
}

func get(t *testing.T, h http.Handler, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestPageShowsEverySection(t *testing.T) {
	h := Handler{Source: sample(), Peer: peers, Now: func() time.Time { return fixedNow }}
	code, body := get(t, h, "/ui")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	for _, want := range []string{
		`<meta http-equiv="refresh" content="5">`,
		`<b id="leader">n1</b>`, `<span id="term">7</span>`,
		`data-member="n1" data-leader="true"`, `data-member="n2" data-leader="false"`,
		// lag against the leader's commit index 100: n2 applied 90.
		`<td class="num">90</td><td class="num">90</td><td class="num">10</td>`,
		`unreachable: connection refused`,
		`data-pchannel="dml_0" data-node="11" data-state="ASSIGNED" class="ok"`,
		`data-pchannel="dml_1" data-node="11" data-state="ASSIGNING" class="warn"`,
		// not on a live node, red, with its error escaped.
		`data-pchannel="dml_2" data-node="0" data-state="UNAVAILABLE" class="bad"`,
		`node 12 &lt;gone&gt;</span> (2 failed)`,
		`2 pending, 1 with a failing callback`,
		`<tr data-broadcast="6" class="bad">`, `<td>1m0s</td>`,
		// v0: 1 growing, 2 flushed, checkpoint lag 1500 ms; v1 only a checkpoint.
		`<td class="num">1</td><td class="num">0</td><td class="num">0</td><td class="num">2</td>`,
		`title="hybrid timestamp 4242">1970-01-01 00:00:00.000</td><td class="num">1.5s</td>`, `data-vchannel="v1"`,
		// the verdict comes first: ASSIGNING/UNAVAILABLE channels, n3 down, a failing callback.
		`<p id="verdict" class="verdict warn" data-verdict="degraded"><b>degraded</b>: member n3 unreachable`,
		`id="page-complete"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, `data-vchannel="gone"`) {
		t.Error("a dropped vchannel is shown")
	}
	if strings.Contains(body, "<script") {
		t.Error("the page carries a script")
	}
}

func TestPageReportsAFailedSectionAndShowsTheRest(t *testing.T) {
	src := sample()
	src.segsFail = errors.New("no leader")
	_, body := get(t, Handler{Source: src, Peer: peers, Now: func() time.Time { return fixedNow }}, "/ui?refresh=0")
	if !strings.Contains(body, "could not read segments: no leader") {
		t.Error("failed section not reported")
	}
	if !strings.Contains(body, `data-pchannel="dml_0"`) {
		t.Error("other sections missing")
	}
	if strings.Contains(body, "http-equiv") {
		t.Error("refresh=0 still reloads")
	}
}

func TestPageRefusesBadQuery(t *testing.T) {
	h := Handler{Source: sample(), Peer: peers, Now: func() time.Time { return fixedNow }}
	for _, q := range []string{"?refresh=-1", "?refresh=x", "?refresh=3601", "?refresh=1&refresh=2", "?foo=1"} {
		code, body := get(t, h, "/ui"+q)
		if code != http.StatusBadRequest || !strings.Contains(body, "refresh") {
			t.Errorf("%s: %d %q, want 400 naming refresh", q, code, body)
		}
	}
	if code, _ := get(t, h, "/ui?refresh=60"); code != http.StatusOK {
		t.Errorf("refresh=60: %d", code)
	}
}
