package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client/clienttest"
	"github.com/coordd/coordd/testutil"
)

// sampleCluster is a fake cluster holding clienttest.SampleChannelState.
func sampleCluster(t *testing.T, n int) *clienttest.Cluster {
	t.Helper()
	fc := clienttest.Start(t, n)
	fc.SetChannelState(clienttest.SampleChannelState())
	return fc
}

func strictDecode(t *testing.T, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("bad JSON %q: %v", s, err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", s)
	}
}

func TestPChannelListJSON(t *testing.T) {
	fc := sampleCluster(t, 3)
	code, out, errs := ctl(t, fc, "pchannel", "list", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := decode(t, out)
	if m["cchannel"] != "by-dev-rootcoord-dml_0_vcchan" {
		t.Errorf("cchannel = %#v", m["cchannel"])
	}
	v, ok := m["version"].(map[string]any)
	if !ok {
		t.Fatalf("version = %#v", m["version"])
	}
	wantNumber(t, v, "global", 3)
	wantNumber(t, v, "local", 7)
	ps, ok := m["pchannels"].([]any)
	if !ok || len(ps) != 3 {
		t.Fatalf("pchannels = %#v", m["pchannels"])
	}
	p0 := ps[0].(map[string]any)
	for k, want := range map[string]any{"name": "by-dev-rootcoord-dml_0", "state": "ASSIGNED", "node_address": "127.0.0.1:21001",
		"owner_state": "UP", "access_mode": "RW", "available_in_replication": true, "last_error": ""} {
		if p0[k] != want {
			t.Errorf("pchannels[0].%s = %#v, want %#v", k, p0[k], want)
		}
	}
	wantNumber(t, p0, "term", 4)
	wantNumber(t, p0, "node_id", 1)
	wantNumber(t, p0, "vchannel_count", 2)
	wantNumber(t, p0, "last_assign_unix_ms", 1_700_000_000_123)
	wantNumber(t, p0, "failed_attempts", 0)
	p2 := ps[2].(map[string]any)
	if p2["state"] != "UNAVAILABLE" || p2["last_error"] != "wal broken: not the owner" || p2["owner_state"] != "DRAINING" {
		t.Errorf("pchannels[2] = %#v", p2)
	}
	wantNumber(t, p2, "failed_attempts", 3)

	// Exactly the documented fields.
	var strict struct {
		PChannels []struct {
			Name                   string `json:"name"`
			Term                   int64  `json:"term"`
			State                  string `json:"state"`
			NodeID                 uint64 `json:"node_id"`
			NodeAddress            string `json:"node_address"`
			OwnerState             string `json:"owner_state"`
			AccessMode             string `json:"access_mode"`
			AvailableInReplication bool   `json:"available_in_replication"`
			VChannelCount          uint32 `json:"vchannel_count"`
			LastAssignUnixMs       int64  `json:"last_assign_unix_ms"`
			LastError              string `json:"last_error"`
			FailedAttempts         uint32 `json:"failed_attempts"`
		} `json:"pchannels"`
		CChannel string `json:"cchannel"`
		Version  struct {
			Global uint64 `json:"global"`
			Local  uint64 `json:"local"`
		} `json:"version"`
	}
	strictDecode(t, out, &strict)

	// --stale is served by a follower that does not forward.
	fc.SetForwarding(false)
	before := fc.Nodes[0].Calls("ListPChannels")
	code, out, errs = ctl(t, fc, "--endpoints", fc.Nodes[1].Addr, "pchannel", "list", "--stale", "-o", "json")
	if code != exitOK || len(decode(t, out)["pchannels"].([]any)) != 3 {
		t.Fatalf("--stale: exit %d: %s %s", code, out, errs)
	}
	if fc.Nodes[1].Calls("ListPChannels") != 1 || fc.Nodes[0].Calls("ListPChannels") != before {
		t.Fatal("--stale read did not stay on the follower")
	}

	// An empty list is [], not null.
	fc.SetChannelState(clienttest.ChannelState{})
	if _, out, _ = ctl(t, fc, "pchannel", "list", "-o", "json"); !strings.Contains(out, `"pchannels": []`) {
		t.Fatalf("empty list: %s", out)
	}
}

func TestPChannelListTable(t *testing.T) {
	fc := sampleCluster(t, 1)
	code, out, errs := ctl(t, fc, "pchannel", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "NAME") || strings.Join(strings.Fields(lines[0]), " ") != "NAME TERM STATE NODE OWNER ADDRESS VCHANNELS LAST ERROR" {
		t.Fatalf("header %q", lines[0])
	}
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "by-dev-rootcoord-dml_0 4 ASSIGNED 1 UP 127.0.0.1:21001 2 -" {
		t.Fatalf("row %q", got)
	}
	if got := strings.Join(strings.Fields(lines[3]), " "); got != "by-dev-rootcoord-dml_2 5 UNAVAILABLE 2 DRAINING 127.0.0.1:21002 0 wal broken: not the owner" {
		t.Fatalf("row %q", got)
	}
	if !strings.Contains(out, "CChannel by-dev-rootcoord-dml_0_vcchan; assignment version 3.7.") || strings.Contains(out, "cannot take writes") {
		t.Fatalf("footer:\n%s", out)
	}
}

// The OWNER column names a silent or DOWN owner (newcomer D2: an ASSIGNED
// row on a DOWN node said nothing), the footer counts what cannot take
// writes, and JSON carries owner_state; a --stale read says it cannot
// know SILENT.
func TestPChannelListShowsSilentAndDownOwners(t *testing.T) {
	fc := sampleCluster(t, 1)
	st := clienttest.SampleChannelState()
	st.Nodes[0].Silent = true                                     // node 1: UP, its heartbeat late
	st.PChannels[2].NodeId, st.PChannels[2].State = 3, "ASSIGNED" // on node 3, DOWN
	fc.SetChannelState(st)
	code, out, errs := ctl(t, fc, "pchannel", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	for i, want := range map[int]string{
		1: "by-dev-rootcoord-dml_0 4 ASSIGNED 1 SILENT 127.0.0.1:21001 2 -",
		2: "by-dev-rootcoord-dml_1 2 ASSIGNED 1 SILENT 127.0.0.1:21001 1 -",
		3: "by-dev-rootcoord-dml_2 5 ASSIGNED 3 DOWN 127.0.0.1:21002 0 wal broken: not the owner",
	} {
		if got := strings.Join(strings.Fields(lines[i]), " "); got != want {
			t.Errorf("row %d %q, want %q", i, got, want)
		}
	}
	if !strings.Contains(out, "3 pchannel(s) under a SILENT or DOWN owner cannot take writes until it heartbeats again or the node TTL moves them.") {
		t.Errorf("no count of what cannot take writes:\n%s", out)
	}
	_, out, _ = ctl(t, fc, "pchannel", "list", "-o", "json")
	var got struct {
		PChannels []struct {
			Name       string `json:"name"`
			OwnerState string `json:"owner_state"`
		} `json:"pchannels"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.PChannels) != 3 ||
		got.PChannels[0].OwnerState != "SILENT" || got.PChannels[2].OwnerState != "DOWN" {
		t.Fatalf("JSON owner states %+v (%v):\n%s", got.PChannels, err, out)
	}
	if _, out, _ = ctl(t, fc, "pchannel", "list", "--stale"); !strings.Contains(out, "a follower's OWNER never says SILENT") {
		t.Errorf("--stale does not say it cannot know SILENT:\n%s", out)
	}
}

func TestPChannelAddAndRebalance(t *testing.T) {
	fc := sampleCluster(t, 1)
	code, out, errs := ctl(t, fc, "pchannel", "add", "by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_3", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := decode(t, out)
	wantNumber(t, m, "added", 1)
	wantNumber(t, m, "existing", 1)
	if ps := fc.ChannelState().PChannels; len(ps) != 4 || ps[3].Name != "by-dev-rootcoord-dml_3" || ps[3].State != "UNINITIALIZED" {
		t.Fatalf("pchannels after add: %v", ps)
	}
	code, out, _ = ctl(t, fc, "pchannel", "add", "by-dev-rootcoord-dml_3")
	if code != exitOK || out != "Added 0 pchannel(s); 1 already existed.\n" {
		t.Fatalf("exit %d: %q", code, out)
	}
	code, out, _ = ctl(t, fc, "pchannel", "rebalance")
	if code != exitOK || !strings.Contains(out, "Rebalance requested") || fc.Nodes[0].Calls("Rebalance") != 1 {
		t.Fatalf("rebalance: exit %d: %q", code, out)
	}
}

func TestNodeListJSON(t *testing.T) {
	fc := sampleCluster(t, 3)
	code, out, errs := ctl(t, fc, "node", "list", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Nodes []struct {
			ID                 uint64   `json:"id"`
			Address            string   `json:"address"`
			ResourceGroup      string   `json:"resource_group"`
			State              string   `json:"state"`
			Epoch              uint64   `json:"epoch"`
			PChannels          []string `json:"pchannels"`
			LastHeartbeatMsAgo int64    `json:"last_heartbeat_ms_ago"`
			Reason             string   `json:"reason"`
		} `json:"nodes"`
	}
	strictDecode(t, out, &got)
	if len(got.Nodes) != 2 {
		t.Fatalf("%d nodes (DOWN listed without --all?): %s", len(got.Nodes), out)
	}
	n1, n2 := got.Nodes[0], got.Nodes[1]
	if n1.ID != 1 || n1.Address != "127.0.0.1:21001" || n1.ResourceGroup != "default" || n1.State != "UP" || n1.Epoch != 1 ||
		!slices.Equal(n1.PChannels, []string{"by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"}) || n1.LastHeartbeatMsAgo != 120 || n1.Reason != "" {
		t.Fatalf("node 1 = %+v", n1)
	}
	if n2.ID != 2 || n2.State != "DRAINING" || n2.Epoch != 2 || n2.PChannels == nil || len(n2.PChannels) != 0 || n2.Reason != "operator request" {
		t.Fatalf("node 2 = %+v", n2)
	}
	m := decode(t, out)
	node := m["nodes"].([]any)[0].(map[string]any)
	wantNumber(t, node, "id", 1)
	wantNumber(t, node, "last_heartbeat_ms_ago", 120)
	if !strings.Contains(out, `"pchannels": []`) {
		t.Fatalf("node 2's pchannels are not []: %s", out)
	}

	code, out, _ = ctl(t, fc, "node", "list", "--all", "-o", "json")
	strictDecode(t, out, &got)
	if code != exitOK || len(got.Nodes) != 3 || got.Nodes[2].State != "DOWN" || got.Nodes[2].LastHeartbeatMsAgo != -1 {
		t.Fatalf("--all: exit %d: %s", code, out)
	}

	code, out, _ = ctl(t, fc, "node", "list", "--all")
	if code != exitOK || !strings.Contains(out, "ID  ADDRESS") || !strings.Contains(out, "120ms ago") ||
		!regexp.MustCompile(`by-dev-rootcoord-dml_0 \(2\)\s.*\n\s+by-dev-rootcoord-dml_1\s*\n`).MatchString(out) || !strings.Contains(out, "session expired") {
		t.Fatalf("table: exit %d:\n%s", code, out)
	}
}

func TestNodeDrainUndrain(t *testing.T) {
	fc := sampleCluster(t, 3)
	fc.SetLeader(2)
	code, out, errs := ctl(t, fc, "node", "drain", "1", "--reason", "kernel upgrade", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	node := decode(t, out)["node"].(map[string]any)
	if node["state"] != "DRAINING" || node["reason"] != "kernel upgrade" {
		t.Fatalf("drain: %s", out)
	}
	wantNumber(t, node, "id", 1)
	code, out, _ = ctl(t, fc, "node", "undrain", "1")
	if code != exitOK || !strings.HasPrefix(out, "Node 1 is UP.\n") {
		t.Fatalf("undrain: exit %d:\n%s", code, out)
	}
	code, out, errs = ctl(t, fc, "node", "drain", "99")
	if code != exitFail || out != "" || errs != "coordctl: drain node 99: streaming node 99 not found\n" {
		t.Fatalf("unknown node: exit %d, %q, %q", code, out, errs)
	}
}

func TestVChannelAlloc(t *testing.T) {
	fc := sampleCluster(t, 3)
	code, out, errs := ctl(t, fc, "vchannel", "alloc", "42", "2", "--request-id", "req-1", "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		VChannels []string `json:"vchannels"`
	}
	strictDecode(t, out, &got)
	// Fewest vchannels first: dml_2 has 0, dml_1 has 1.
	want := []string{"by-dev-rootcoord-dml_2_42v0", "by-dev-rootcoord-dml_1_42v1"}
	if !slices.Equal(got.VChannels, want) {
		t.Fatalf("vchannels %v, want %v", got.VChannels, want)
	}
	// The same request ID returns the first answer.
	_, out, _ = ctl(t, fc, "vchannel", "alloc", "42", "2", "--request-id", "req-1", "-o", "json")
	strictDecode(t, out, &got)
	if !slices.Equal(got.VChannels, want) {
		t.Fatalf("retry: vchannels %v, want %v", got.VChannels, want)
	}

	// Now dml_2 has 1 vchannel, dml_0 and dml_1 have 2.
	code, out, _ = ctl(t, fc, "vchannel", "alloc", "43", "1")
	if code != exitOK || strings.Join(strings.Fields(out), " ") != "COLLECTION VCHANNEL PCHANNEL 43 by-dev-rootcoord-dml_2_43v0 by-dev-rootcoord-dml_2" {
		t.Fatalf("table: exit %d:\n%s", code, out)
	}
	code, _, errs = ctl(t, fc, "vchannel", "alloc", "44", "4")
	if code != exitFail || !strings.Contains(errs, "needs 4 distinct pchannels, only 3 are available") {
		t.Fatalf("too many: exit %d, %q", code, errs)
	}

	code, out, _ = ctl(t, fc, "vchannel", "list", "-o", "json")
	var list struct {
		Collections []struct {
			CollectionID int64    `json:"collection_id"`
			VChannels    []string `json:"vchannels"`
		} `json:"collections"`
	}
	strictDecode(t, out, &list)
	if code != exitOK || len(list.Collections) != 2 || list.Collections[0].CollectionID != 42 || !slices.Equal(list.Collections[0].VChannels, want) {
		t.Fatalf("list: exit %d: %s", code, out)
	}
	code, out, _ = ctl(t, fc, "vchannel", "list", "43", "--stale")
	if code != exitOK || !strings.Contains(out, "by-dev-rootcoord-dml_2_43v0") || strings.Contains(out, "42v0") {
		t.Fatalf("list 43: exit %d:\n%s", code, out)
	}
	code, out, _ = ctl(t, fc, "vchannel", "drop", "42")
	if code != exitOK || out != "Dropped the vchannels of collection 42.\n" {
		t.Fatalf("drop: exit %d: %q", code, out)
	}
	code, out, errs = ctl(t, fc, "vchannel", "list", "42")
	if code != exitFail || out != "" || errs != "coordctl: vchannel list: collection 42 has no vchannels\n" {
		t.Fatalf("list dropped: exit %d, %q, %q", code, out, errs)
	}
}

// ctlAsync runs coordctl in the background; the returned channel yields
// its exit code.
func ctlAsync(ctx context.Context, fc *clienttest.Cluster, stdout, stderr io.Writer, args ...string) <-chan int {
	args = append([]string{"--endpoints", strings.Join(fc.Endpoints(), ","), "--timeout", "2s"}, args...)
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr, noEnv) }()
	return done
}

func TestAssignmentWatchJSON(t *testing.T) {
	fc := clienttest.Start(t, 2)
	feed := make(chan *coordpb.AssignmentUpdate, 4)
	full := &coordpb.AssignmentUpdate{Version: &coordpb.Version{Global: 3, Local: 7}, Full: true, Cchannel: "dml_0_vcchan",
		Nodes: []*coordpb.StreamingNode{{Id: 1, State: "UP"}, {Id: 2, State: "DRAINING"}},
		Channels: []*coordpb.ChannelAssignment{
			{Pchannel: "dml_0", Term: 1, State: "ASSIGNED", NodeId: 1},
			{Pchannel: "dml_1", Term: 1, State: "ASSIGNED", NodeId: 1},
			{Pchannel: "dml_2", Term: 2, State: "ASSIGNED", NodeId: 2},
			{Pchannel: "dml_3", Term: 1, State: "ASSIGNING", NodeId: 2},
		}}
	// The first member sends the full view, then its stream breaks; the
	// second carries on from there.
	fc.Nodes[0].ScriptWatch(clienttest.WatchStream{Updates: []*coordpb.AssignmentUpdate{full}, End: errors.New("injected: stream broken")})
	fc.Nodes[1].ScriptWatch(clienttest.WatchStream{Feed: feed})

	var stdout, stderr testutil.Buffer
	done := ctlAsync(context.Background(), fc, &stdout, &stderr, "assignment", "watch", "--count", "2", "--duration", "5s", "-o", "json")
	testutil.Eventually(t, "the first view", func() bool { return strings.Count(stdout.String(), "\n") == 1 })
	testutil.Eventually(t, "the watcher to resume on the second member", func() bool { return fc.Nodes[1].OpenWatches() == 1 })
	// Older and equal versions are not views; the delta moves dml_2 to
	// node 1 and drops node 2.
	feed <- &coordpb.AssignmentUpdate{Version: &coordpb.Version{Global: 3, Local: 6}, Cchannel: "dml_0_vcchan",
		Nodes: []*coordpb.StreamingNode{{Id: 9, State: "UP"}}}
	feed <- &coordpb.AssignmentUpdate{Version: &coordpb.Version{Global: 3, Local: 7}, Cchannel: "dml_0_vcchan",
		Nodes: []*coordpb.StreamingNode{{Id: 8, State: "UP"}}}
	feed <- &coordpb.AssignmentUpdate{Version: &coordpb.Version{Global: 3, Local: 9}, Cchannel: "dml_0_vcchan",
		Nodes:    []*coordpb.StreamingNode{{Id: 2, State: "DOWN"}},
		Channels: []*coordpb.ChannelAssignment{{Pchannel: "dml_2", Term: 3, State: "ASSIGNED", NodeId: 1}}}
	var code int
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("assignment watch --count 2 did not stop")
	}
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}

	type line struct {
		Version struct {
			Global uint64 `json:"global"`
			Local  uint64 `json:"local"`
		} `json:"version"`
		CChannel string `json:"cchannel"`
		Nodes    int    `json:"nodes"`
		Assigned []struct {
			NodeID   uint64 `json:"node_id"`
			State    string `json:"state"`
			Channels int    `json:"channels"`
		} `json:"assigned"`
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(lines), stdout.String())
	}
	var l1, l2 line
	strictDecode(t, lines[0], &l1)
	strictDecode(t, lines[1], &l2)
	if l1.Version.Global != 3 || l1.Version.Local != 7 || l1.Nodes != 2 || l1.CChannel != "dml_0_vcchan" || len(l1.Assigned) != 2 ||
		l1.Assigned[0].NodeID != 1 || l1.Assigned[0].Channels != 2 || l1.Assigned[1].NodeID != 2 || l1.Assigned[1].Channels != 1 ||
		l1.Assigned[1].State != "DRAINING" {
		t.Fatalf("first view %s", lines[0])
	}
	if l2.Version.Global != 3 || l2.Version.Local != 9 || l2.Nodes != 1 || len(l2.Assigned) != 1 ||
		l2.Assigned[0].NodeID != 1 || l2.Assigned[0].Channels != 3 {
		t.Fatalf("second view %s", lines[1])
	}
	if f := fc.Nodes[1].WatchFroms(); len(f) != 1 || !proto.Equal(f[0], &coordpb.Version{Global: 3, Local: 7}) {
		t.Fatalf("second member's from_version %v, want 3.7", f)
	}
	if m := decode(t, lines[0]); m["nodes"] != json.Number("2") {
		t.Fatalf("nodes is not a JSON number: %s", lines[0])
	}
}

func TestAssignmentWatchTableAndStops(t *testing.T) {
	fc := sampleCluster(t, 1) // an unscripted stream sends the full view
	code, out, errs := ctl(t, fc, "assignment", "watch", "--count", "1")
	if code != exitOK || !strings.Contains(out, "version 3.7  nodes 2  assigned 1=2 2=0\n") || strings.Count(out, "\n") != 1 {
		t.Fatalf("exit %d, %q, %q", code, out, errs)
	}

	// --duration ends a watch that saw a view: exit 0.
	start := time.Now()
	code, out, _ = ctl(t, fc, "assignment", "watch", "--duration", "150ms", "-o", "json")
	if code != exitOK || strings.Count(out, "\n") != 1 || time.Since(start) > 3*time.Second {
		t.Fatalf("--duration: exit %d after %v: %q", code, time.Since(start), out)
	}

	// No view within --duration: exit 1.
	empty := clienttest.Start(t, 1)
	code, out, errs = ctl(t, empty, "assignment", "watch", "--duration", "150ms")
	if code != exitFail || out != "" || errs != "coordctl: assignment watch: no assignment view received within 150ms\n" {
		t.Fatalf("no view: exit %d, %q, %q", code, out, errs)
	}

	// Ctrl-C (the context ends) stops it with exit 0.
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr testutil.Buffer
	done := ctlAsync(ctx, fc, &stdout, &stderr, "assignment", "watch")
	testutil.Eventually(t, "a view", func() bool { return strings.Contains(stdout.String(), "version 3.7") })
	cancel()
	select {
	case code := <-done:
		if code != exitOK || stderr.String() != "" {
			t.Fatalf("interrupted: exit %d, %q", code, stderr.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("watch did not stop on interrupt")
	}
}

func TestReplicate(t *testing.T) {
	fc := clienttest.Start(t, 3)
	code, out, errs := ctl(t, fc, "replicate", "get", "-o", "json")
	if code != exitOK || strings.Join(strings.Fields(out), " ") != `{ "cluster_id": "by-dev", "role": "PRIMARY", "config": null }` {
		t.Fatalf("get (none): exit %d, %q, %q", code, out, errs)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "replicate.json")
	cfgJSON := `{
  "clusters": [
    {"clusterId": "by-dev", "pchannels": ["by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"]},
    {"cluster_id": "dr-site", "pchannels": ["dr-dml_0", "dr-dml_1"]}
  ],
  "topology": [{"sourceClusterId": "by-dev", "targetClusterId": "dr-site"}]
}`
	if err := os.WriteFile(file, []byte(cfgJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs = ctl(t, fc, "replicate", "set", file)
	if code != exitOK || !strings.Contains(out, "Replication configuration updated (2 clusters, 1 topology edges).") ||
		!strings.Contains(out, "dr-dml_0,dr-dml_1") {
		t.Fatalf("set: exit %d, %q, %q", code, out, errs)
	}
	want := &coordpb.ReplicateConfiguration{
		Clusters: []*coordpb.ReplicateCluster{
			{ClusterId: "by-dev", Pchannels: []string{"by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"}},
			{ClusterId: "dr-site", Pchannels: []string{"dr-dml_0", "dr-dml_1"}},
		},
		Topology: []*coordpb.ReplicateTopology{{SourceClusterId: "by-dev", TargetClusterId: "dr-site"}},
	}
	if got := fc.ReplicateConfiguration(); !proto.Equal(got, want) {
		t.Fatalf("server holds %v, want %v", got, want)
	}

	code, out, _ = ctl(t, fc, "replicate", "get", "-o", "json")
	var got struct {
		ClusterID string `json:"cluster_id"`
		Role      string `json:"role"`
		Config    struct {
			Clusters []struct {
				ClusterID string   `json:"cluster_id"`
				PChannels []string `json:"pchannels"`
			} `json:"clusters"`
			Topology []struct {
				SourceClusterID string `json:"source_cluster_id"`
				TargetClusterID string `json:"target_cluster_id"`
			} `json:"topology"`
		} `json:"config"`
	}
	strictDecode(t, out, &got)
	if code != exitOK || got.ClusterID != "by-dev" || len(got.Config.Clusters) != 2 || got.Config.Clusters[1].ClusterID != "dr-site" ||
		len(got.Config.Topology) != 1 || got.Config.Topology[0].TargetClusterID != "dr-site" {
		t.Fatalf("get: exit %d: %s", code, out)
	}
	code, out, _ = ctl(t, fc, "replicate", "get")
	if code != exitOK || !strings.Contains(out, "Cluster by-dev (PRIMARY).") || !strings.Contains(out, "dr-site  by-dev") {
		t.Fatalf("get table: exit %d:\n%s", code, out)
	}
}

// TestReplicateReset: `replicate reset --reason` makes a secondary a
// primary again; the reason is required; a primary is refused (exit 1).
func TestReplicateReset(t *testing.T) {
	fc := clienttest.Start(t, 1)
	cfg := &coordpb.ReplicateConfiguration{
		Clusters: []*coordpb.ReplicateCluster{{ClusterId: "by-dev", Pchannels: []string{"by-dev-rootcoord-dml_0"}}, {ClusterId: "dr", Pchannels: []string{"dr_0"}}},
		Topology: []*coordpb.ReplicateTopology{{SourceClusterId: "dr", TargetClusterId: "by-dev"}},
	}
	fc.SetReplicateConfiguration(cfg, "by-dev", "SECONDARY")
	if code, _, errs := ctl(t, fc, "replicate", "reset"); code != exitUsage || !strings.Contains(errs, "--reason is required") {
		t.Fatalf("reset without a reason: exit %d, %q", code, errs)
	}
	if got := fc.ReplicateConfiguration(); !proto.Equal(got, cfg) {
		t.Fatalf("a usage error changed the configuration: %v", got)
	}
	code, out, errs := ctl(t, fc, "replicate", "reset", "--reason", "primary site lost")
	if code != exitOK || !strings.Contains(out, "Cluster by-dev is a primary again (PRIMARY).") || strings.Contains(out, "dr_0") {
		t.Fatalf("reset: exit %d, %q, %q", code, out, errs)
	}
	want := &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{{ClusterId: "by-dev", Pchannels: []string{"by-dev-rootcoord-dml_0"}}}}
	if got := fc.ReplicateConfiguration(); !proto.Equal(got, want) {
		t.Fatalf("server holds %v, want %v", got, want)
	}
	if code, _, errs := ctl(t, fc, "replicate", "reset", "--reason", "again"); code != exitFail || !strings.Contains(errs, "already a primary") {
		t.Fatalf("reset of a primary: exit %d, %q", code, errs)
	}
}

// TestReplicateSetBadFile: a FILE that is not a valid configuration is a
// usage error and nothing is sent.
func TestReplicateSetBadFile(t *testing.T) {
	fc := clienttest.Start(t, 1)
	dir := t.TempDir()
	for name, tc := range map[string]struct{ content, want string }{
		"notjson":   {`{"clusters": [`, "not a ReplicateConfiguration in protojson form"},
		"unknown":   {`{"clusters": [{"cluster_id": "a", "pchannels": ["a_0"]}], "extra": 1}`, "not a ReplicateConfiguration"},
		"empty":     {`{}`, "needs 1..64 clusters, got 0"},
		"selfloop":  {`{"clusters": [{"cluster_id": "a", "pchannels": ["a_0"]}], "topology": [{"source_cluster_id": "a", "target_cluster_id": "a"}]}`, "self loop"},
		"badname":   {`{"clusters": [{"cluster_id": "a", "pchannels": ["a0"]}]}`, `pchannel name "a0"`},
		"mismatch":  {`{"clusters": [{"cluster_id": "a", "pchannels": ["a_0"]}, {"cluster_id": "b", "pchannels": ["b_0", "b_1"]}]}`, "same number of pchannels"},
		"unlisted":  {`{"clusters": [{"cluster_id": "a", "pchannels": ["a_0"]}], "topology": [{"source_cluster_id": "a", "target_cluster_id": "z"}]}`, "unlisted cluster"},
		"duplicate": {`{"clusters": [{"cluster_id": "a", "pchannels": ["a_0"]}, {"cluster_id": "a", "pchannels": ["a_1"]}]}`, "listed twice"},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(dir, name+".json")
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := ctl(t, fc, "replicate", "set", file)
			if code != exitUsage || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, tc.want) {
				t.Fatalf("exit %d, %q, stderr %q (want %q)", code, out, errs, tc.want)
			}
		})
	}
	if n := fc.Nodes[0].Calls("UpdateReplicateConfiguration"); n != 0 {
		t.Fatalf("UpdateReplicateConfiguration reached the server %d times", n)
	}
}

// TestChannelBadInputSendsNothing: invalid channel commands never reach
// the server.
func TestChannelBadInputSendsNothing(t *testing.T) {
	fc := sampleCluster(t, 1)
	for _, args := range [][]string{
		{"pchannel", "add", "bad"}, {"pchannel", "add", "x_1", "x_1"}, {"pchannel", "list", "extra"},
		{"node", "drain", "0"}, {"node", "undrain", "-4"}, {"node", "list", "--stale=x"},
		{"vchannel", "alloc", "0", "1"}, {"vchannel", "alloc", "1", "1025"}, {"vchannel", "list", "-1"}, {"vchannel", "drop", "x"},
		{"assignment", "watch", "--count", "-2"}, {"replicate", "set"},
	} {
		if code, _, _ := ctl(t, fc, args...); code != exitUsage {
			t.Fatalf("%v: exit %d", args, code)
		}
	}
	for _, m := range []string{"AddPChannels", "ListPChannels", "DrainNode", "UndrainNode", "ListNodes",
		"AllocVirtualChannels", "ListVirtualChannels", "DropVirtualChannels", "WatchAssignments", "UpdateReplicateConfiguration"} {
		if n := fc.Nodes[0].Calls(m); n != 0 {
			t.Fatalf("%s reached the server %d times", m, n)
		}
	}
}
