package statuspage

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// leaderSource is healthySource drawn by the leader n1, which knows the
// heartbeat ages: node 11 beat 300 ms ago, node 12 ageMs ago, judged
// silent by the leader when silent is set (TTL 10 s, silent after 2 s).
func leaderSource(ageMs int64, silent bool) cannedSource {
	src := healthySource()
	src.status.NodeId, src.status.State = "n1", "Leader"
	for _, n := range src.nodes.Nodes {
		if n.State == "DOWN" {
			n.LastHeartbeatMsAgo = -1
			continue
		}
		n.LastHeartbeatMsAgo, n.NodeTtlMs, n.SilentAfterMs = 300, 10000, 2000
	}
	src.nodes.Nodes[1].LastHeartbeatMsAgo, src.nodes.Nodes[1].Silent = ageMs, silent
	return src
}

func leaderPeers(ctx context.Context, addr string) (*coordpb.StatusResponse, error) {
	return &coordpb.StatusResponse{State: "Follower", Term: 7, CommitIndex: 90, AppliedIndex: 90}, nil
}

// A node the leader judges silent turns the verdict degraded with the
// node, how long it has been silent, the PChannels that cannot take
// writes and when coordd acts; its header and rows are red. Before the
// leader judges it silent the same page is healthy.
func TestSilentNodeMakesThePageDegraded(t *testing.T) {
	h := Handler{Source: leaderSource(1500, false), Peer: leaderPeers, Now: func() time.Time { return fixedNow }}
	if v := gather(context.Background(), h); v.Verdict.Level != levelHealthy {
		t.Fatalf("1.5s since the last heartbeat, not judged silent: verdict %s %v, want healthy", v.Verdict.Level, v.Verdict.Reasons)
	}
	h.Source = leaderSource(2300, true)
	v := gather(context.Background(), h)
	want := "streaming node 12 (a:2) silent for 2.3s (no heartbeat; silent after 2s): 2 pchannel(s) cannot take writes (dml_2, dml_3); " +
		"coordd marks it DOWN and moves them when its 10s TTL runs out, in 7.7s"
	if v.Verdict.Level != levelDegraded || len(v.Verdict.Reasons) != 1 || v.Verdict.Reasons[0] != want {
		t.Fatalf("verdict %s %q\nwant degraded: %q", v.Verdict.Level, v.Verdict.Reasons, want)
	}
	if want := "streaming nodes UP 1 · SILENT 1 · pchannels ASSIGNED 2/4 · 2 more on a silent node"; !strings.Contains(v.Verdict.Summary, want) {
		t.Fatalf("summary %q lacks %q", v.Verdict.Summary, want)
	}
	_, body := get(t, h, "/ui?refresh=0")
	for _, w := range []string{
		`data-verdict="degraded"><b>degraded</b>: streaming node 12 (a:2) silent for 2.3s`,
		`<h3 data-node="12" data-node-state="SILENT" class="bad">node 12 · a:2 · <span class="bad">SILENT</span> (UP in the log, no heartbeat for 2.3s: its pchannels cannot take writes; DOWN and moved when its 10s TTL runs out, in 7.7s)`,
		`data-pchannel="dml_2" data-node="12" data-state="ASSIGNED" class="bad" data-owner-state="SILENT"`,
		`<td>ASSIGNED · owner SILENT: cannot take writes</td>`,
		// the live node's rows stay green.
		`data-pchannel="dml_0" data-node="11" data-state="ASSIGNED" class="ok" data-owner-state="UP"`,
		`heartbeat 300ms ago`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if strings.Contains(body, `id="leader-only"`) {
		t.Error("the leader's page says only the leader knows heartbeat ages")
	}
}

// Every live node silent: nothing can be written, so unavailable.
func TestAllNodesSilentIsUnavailable(t *testing.T) {
	src := leaderSource(3000, true)
	src.nodes.Nodes[0].LastHeartbeatMsAgo, src.nodes.Nodes[0].Silent = 2500, true
	v := gather(context.Background(), Handler{Source: src, Peer: leaderPeers, Now: func() time.Time { return fixedNow }})
	all := strings.Join(v.Verdict.Reasons, "; ")
	if v.Verdict.Level != levelUnavailable || !strings.Contains(all, "no streaming node is UP and heartbeating (2 silent): inserts cannot be written") ||
		!strings.Contains(all, "streaming node 11 (a:1) silent for 2.5s") {
		t.Fatalf("verdict %s %q", v.Verdict.Level, all)
	}
}

// Under a DOWN owner the PChannel rows are red and say why, not green
// ASSIGNED as before.
func TestRowsUnderADownNodeAreNotGreen(t *testing.T) {
	src := leaderSource(300, false)
	src.nodes.Nodes[1].State, src.nodes.Nodes[1].LastHeartbeatMsAgo = "DOWN", -1
	_, body := get(t, Handler{Source: src, Peer: leaderPeers, Now: func() time.Time { return fixedNow }}, "/ui?refresh=0")
	for _, w := range []string{
		`data-pchannel="dml_3" data-node="12" data-state="ASSIGNED" class="bad" data-owner-state="DOWN"`,
		`<td>ASSIGNED · owner DOWN: cannot take writes</td>`,
		`<h3 data-node="12" data-node-state="DOWN" class="bad">`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

// A follower cannot judge silence: its page says so and links to the
// leader's page (https on a secure cluster), in the verdict area and in
// each live node's header.
func TestFollowerPageSendsToTheLeader(t *testing.T) {
	src := healthySource()
	for _, n := range src.nodes.Nodes {
		n.LastHeartbeatMsAgo = -1 // as a follower answers
	}
	h := Handler{Source: src, Peer: allPeersUp, Now: func() time.Time { return fixedNow }, Scheme: "https"}
	_, body := get(t, h, "/ui?refresh=0")
	for _, w := range []string{
		`<p class="meta" id="leader-only">heartbeat ages are known only to the leader, so this page (drawn by n2, not the leader) cannot tell a silent streaming node from a live one: see <a id="leader-page" href="https://127.0.0.1:1/ui">the leader's page</a></p>`,
		`heartbeat <span class="meta">age known only to the leader (<a href="https://127.0.0.1:1/ui">its page</a>)</span></h3>`,
		`<a href="https://127.0.0.1:3/ui">127.0.0.1:3</a>`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}
