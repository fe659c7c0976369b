package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/cluster"
)

// TestReadyzReportsAFollowerThatCannotAppend is probe D14: a follower whose
// file size limit (a stand-in for a full disk) stops its raft log from
// growing keeps getting heartbeats, but /readyz must stop saying ready.
func TestReadyzReportsAFollowerThatCannotAppend(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{})
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leader := leaderIndex(t, l, c, -1)
	f := (leader + 1) % 3
	m := l.Members()[f]
	if err := l.Kill(f); err != nil {
		t.Fatal(err)
	}
	// 192 KiB: enough to start, not enough for the entries below.
	startProcess(t, "limited-follower", "sh", append([]string{"-c", `ulimit -f 192; exec "$0" "$@"`, coorddBinary}, memberArgs(l, f)...)...)
	waitReady(t, ctx, l, f)
	var body map[string]any
	for id := int64(1); id <= 3000; id++ {
		if err := allocCollection(ctx, c, id); err != nil {
			t.Fatalf("commit %d on the healthy members: %v", id, err)
		}
		if id%50 != 0 {
			continue
		}
		code, b := readyz(t, l, m.HTTPAddr)
		if code == http.StatusServiceUnavailable && strings.Contains(b["status"].(string), "cannot append to its raft log") {
			body = b
			break
		}
	}
	if body == nil {
		t.Fatal("the follower that cannot append still says ready after 3000 entries")
	}
	t.Logf("limited follower: %v", body)
}

func readyz(t *testing.T, l *cluster.Launcher, addr string) (int, map[string]any) {
	t.Helper()
	resp, err := httpClient(2 * time.Second).Get(memberURL(l, addr, "/readyz"))
	if err != nil {
		return 0, map[string]any{"status": err.Error()}
	}
	defer resp.Body.Close()
	var b map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&b)
	if b == nil {
		b = map[string]any{"status": ""}
	}
	if _, ok := b["status"].(string); !ok {
		b["status"] = ""
	}
	return resp.StatusCode, b
}
