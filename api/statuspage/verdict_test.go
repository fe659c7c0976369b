package statuspage

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// healthySource is a three-member cluster with two UP streaming nodes
// holding two PChannels each, every PChannel ASSIGNED.
func healthySource() cannedSource {
	src := sample()
	src.pcs = &coordpb.ListPChannelsResponse{Pchannels: []*coordpb.PChannel{
		{Name: "dml_0", Term: 4, State: "ASSIGNED", NodeId: 11}, {Name: "dml_1", Term: 4, State: "ASSIGNED", NodeId: 11},
		{Name: "dml_2", Term: 4, State: "ASSIGNED", NodeId: 12}, {Name: "dml_3", Term: 4, State: "ASSIGNED", NodeId: 12},
	}}
	src.nodes = &coordpb.ListNodesResponse{Nodes: []*coordpb.StreamingNode{
		{Id: 11, Address: "a:1", State: "UP", Epoch: 2}, {Id: 12, Address: "a:2", State: "UP", Epoch: 3},
		{Id: 3, Address: "a:3", State: "DOWN"}, // an earlier session: history, not a problem
	}}
	src.bcasts = &coordpb.ListBroadcastsResponse{}
	return src
}

func allPeersUp(ctx context.Context, addr string) (*coordpb.StatusResponse, error) {
	st := "Follower"
	if addr == "127.0.0.1:1" {
		st = "Leader"
	}
	return &coordpb.StatusResponse{State: st, Term: 7, CommitIndex: 90, AppliedIndex: 90}, nil
}

func TestVerdict(t *testing.T) {
	tests := []struct {
		name  string
		src   func() cannedSource
		peer  PeerStatus
		store func() []string // this member's storage faults
		level string
		want  []string // in the reasons
	}{
		{"healthy", healthySource, allPeersUp, nil, levelHealthy, nil},
		{"disk full", healthySource, allPeersUp, func() []string {
			return []string{"disk full: cannot store its term and vote (it takes no part in elections or replication until it can): no space left on device"}
		}, levelDegraded, []string{"member n2 (this page's): disk full: cannot store its term and vote"}},
		{"no leader", func() cannedSource {
			s := healthySource()
			s.status.LeaderId = ""
			for _, m := range s.status.Members {
				m.Leader = false
			}
			return s
		}, allPeersUp, nil, levelUnavailable, []string{"no leader known"}},
		{"no quorum", healthySource, func(ctx context.Context, addr string) (*coordpb.StatusResponse, error) {
			return nil, context.DeadlineExceeded
		}, nil, levelUnavailable, []string{"only 1 of 3 voters answer", "member n1 unreachable"}},
		{"no streaming node", func() cannedSource {
			s := healthySource()
			s.nodes = &coordpb.ListNodesResponse{}
			return s
		}, allPeersUp, nil, levelUnavailable, []string{"no streaming node is UP"}},
		{"down node holding channels", func() cannedSource {
			s := healthySource()
			s.nodes.Nodes[1].State = "DOWN"
			return s
		}, allPeersUp, nil, levelDegraded, []string{"streaming node 12 (a:2) is DOWN holding 2 pchannel(s)", "2 of 4 pchannels not ASSIGNED"}},
		{"imbalance", func() cannedSource {
			s := healthySource()
			for _, p := range s.pcs.Pchannels {
				p.NodeId = 11
			}
			return s
		}, allPeersUp, nil, levelDegraded, []string{"pchannels imbalanced: node 11 holds 4, node 12 holds 0"}},
		{"lagging member", healthySource, func(ctx context.Context, addr string) (*coordpb.StatusResponse, error) {
			st, _ := allPeersUp(ctx, addr)
			if addr == "127.0.0.1:1" {
				st.CommitIndex = 1000
			}
			return st, nil
		}, nil, levelDegraded, []string{"member n2 lags 910 entries"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := gather(context.Background(), Handler{Source: tt.src(), Peer: tt.peer, Storage: tt.store,
				Now: func() time.Time { return fixedNow }})
			if v.Verdict.Level != tt.level {
				t.Fatalf("verdict %s %v, want %s", v.Verdict.Level, v.Verdict.Reasons, tt.level)
			}
			all := strings.Join(v.Verdict.Reasons, "; ")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Fatalf("reasons %q lack %q", all, w)
				}
			}
			if tt.level == levelHealthy && len(v.Verdict.Reasons) != 0 {
				t.Fatalf("healthy with reasons %v", v.Verdict.Reasons)
			}
			// Rendered: the verdict is the first thing after the title, and
			// a missing leader is shown in the error style.
			_, body := get(t, Handler{Source: tt.src(), Peer: tt.peer, Storage: tt.store, Now: func() time.Time { return fixedNow }}, "/ui?refresh=0")
			iv, im := strings.Index(body, `id="verdict"`), strings.Index(body, `id="members"`)
			if iv < 0 || im < 0 || iv > im {
				t.Fatalf("verdict not before the members table")
			}
			if !strings.Contains(body, `data-verdict="`+tt.level+`"`) {
				t.Fatalf("page verdict is not %s", tt.level)
			}
			if tt.name == "no leader" && !strings.Contains(body, `<b id="leader" class="err">none known</b>`) {
				t.Fatalf("no-leader not shown in the error style")
			}
		})
	}
}

func TestHybridTimeAndCollections(t *testing.T) {
	ms := fixedNow.UnixMilli()
	if got := hybridTime(uint64(ms)<<18 | 7); got != "2026-12-01 12:00:00.000" {
		t.Fatalf("hybridTime = %q", got)
	}
	rows := collections([]*coordpb.SegmentInfo{
		{CollectionId: 2, State: "Flushed", NumOfRows: 10}, {CollectionId: 1, State: "Growing", NumOfRows: 3},
		{CollectionId: 2, State: "Growing", NumOfRows: 5}, {CollectionId: 2, State: "Dropped", NumOfRows: 99},
	})
	if len(rows) != 2 || rows[0].ID != 1 || rows[0].Rows != 3 || rows[1].Rows != 15 || rows[1].Segments != 2 || rows[1].Flushed != 1 {
		t.Fatalf("collections = %+v", rows)
	}
}

// TestVerdictNamesPeerDiskFull: a peer whose storage fails (its /readyz
// answers 503 with failing_since) is named in the verdict, read over HTTP
// as the page reads it; a peer that is merely not ready is not.
func TestVerdictNamesPeerDiskFull(t *testing.T) {
	full := "disk full: cannot append to its raft log: write wal/00001.wal: no space left on device"
	readyz := func(body string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/readyz" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, body)
		}))
	}
	fullSrv := readyz(fmt.Sprintf(`{"status":%q,"failing_since":"2026-12-06T07:00:00Z","disk_full":true}`, full))
	defer fullSrv.Close()
	lagSrv := readyz(`{"status":"catching up"}`)
	defer lagSrv.Close()
	// sample()'s members: n1 at 127.0.0.1:1, n3 at 127.0.0.1:3 (n2 draws the page).
	srvs := map[string]*httptest.Server{"127.0.0.1:1": fullSrv, "127.0.0.1:3": lagSrv}
	h := Handler{Source: healthySource(), Peer: allPeersUp, Now: func() time.Time { return fixedNow },
		PeerStorage: func(ctx context.Context, addr string) ([]string, error) {
			srv := srvs[addr]
			return HTTPPeerStorage(srv.Client(), "http")(ctx, strings.TrimPrefix(srv.URL, "http://"))
		}}
	v := gather(context.Background(), h)
	all := strings.Join(v.Verdict.Reasons, "; ")
	if v.Verdict.Level != levelDegraded || !strings.Contains(all, "member n1: "+full) || strings.Contains(all, "n3") {
		t.Fatalf("verdict %s %q, want degraded naming n1's full disk and nothing of n3", v.Verdict.Level, all)
	}
}
