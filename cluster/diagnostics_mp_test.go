package cluster_test

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/cluster"
)

// memberLevel reads a member's log level over HTTP.
func memberLevel(t *testing.T, httpAddr string) string {
	t.Helper()
	var v struct {
		Level string `json:"level"`
	}
	getJSON(t, "http://"+httpAddr+"/v1/admin/log-level", &v)
	return v.Level
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	if err := tryGetJSON(url, v); err != nil {
		t.Fatal(err)
	}
}

func tryGetJSON(url string, v any) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// readBundle returns the files of a tar.gz bundle.
func readBundle(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// TestLogLevelAndDebugBundle drives coordctl against a live three-member
// cluster: log-level changes every member at once (and one with --member),
// a bad level or member changes nothing; with one member SIGKILLed, debug
// bundle still collects the other two (status, members, metrics, log
// level, and the leader's recent errors about the lost member) and names
// the missing one; an existing FILE is not overwritten without --force.
func TestLogLevelAndDebugBundle(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{StreamingNodes: 1})
	eps := l.Endpoints()
	ms := l.Members()
	// Members register their gRPC and HTTP addresses once a leader is
	// established; coordctl reaches each member through them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var mr struct {
			Members []struct {
				GRPCAddr string `json:"grpc_addr"`
				HTTPAddr string `json:"http_addr"`
			} `json:"members"`
		}
		err := tryGetJSON("http://"+ms[0].HTTPAddr+"/v1/cluster/members?consistency=STALE", &mr)
		registered := 0
		for _, m := range mr.Members {
			if m.GRPCAddr != "" && m.HTTPAddr != "" {
				registered++
			}
		}
		if err == nil && registered == len(ms) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members not registered: %+v %v", mr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	if _, code := coordctl(t, eps, "log-level", "debug"); code != 0 {
		t.Fatalf("log-level debug: exit %d", code)
	}
	for _, m := range ms {
		if got := memberLevel(t, m.HTTPAddr); got != "debug" {
			t.Errorf("%s at %s after log-level debug", m.ID, got)
		}
	}
	if _, code := coordctl(t, eps, "log-level", "warn", "--member", ms[1].ID); code != 0 {
		t.Fatalf("log-level warn --member: exit %d", code)
	}
	if _, code := coordctl(t, eps, "log-level", "loud"); code != 2 {
		t.Errorf("bad level: exit %d, want 2", code)
	}
	if _, code := coordctl(t, eps, "log-level", "info", "--member", "nosuch"); code != 1 {
		t.Errorf("unknown member: exit %d, want 1", code)
	}
	for i, want := range []string{"debug", "warn", "debug"} {
		if got := memberLevel(t, ms[i].HTTPAddr); got != want {
			t.Errorf("%s at %s, want %s", ms[i].ID, got, want)
		}
	}
	var levels struct {
		Members []struct{ Member, Level string } `json:"members"`
	}
	coordctlJSON(t, eps, &levels, "log-level")
	if len(levels.Members) != 3 {
		t.Errorf("log-level listing: %+v", levels)
	}

	// Lose a follower; the leader logs errors about it.
	var st struct {
		LeaderID string `json:"leader_id"`
	}
	getJSON(t, "http://"+ms[0].HTTPAddr+"/v1/cluster/status", &st)
	leader, victim := -1, -1
	for i, m := range ms {
		if m.ID == st.LeaderID {
			leader = i
		} else if victim < 0 {
			victim = i
		}
	}
	if leader < 0 {
		t.Fatalf("no leader in %+v", st)
	}
	if err := l.Kill(victim); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var re struct {
			Entries []struct{ Message string } `json:"entries"`
		}
		getJSON(t, "http://"+ms[leader].HTTPAddr+"/v1/admin/recent-errors", &re)
		if len(re.Entries) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the leader logged no error about the killed member")
		}
		time.Sleep(100 * time.Millisecond)
	}

	file := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if _, code := coordctl(t, eps, "debug", "bundle", file); code != 0 {
		t.Fatalf("debug bundle: exit %d", code)
	}
	files := readBundle(t, file)
	if !strings.Contains(files["bundle.txt"], "members: 3, answered: 2") || !strings.Contains(files["bundle.txt"], "not collected: "+ms[victim].ID) {
		t.Errorf("bundle.txt:\n%s", files["bundle.txt"])
	}
	if !strings.Contains(files["members.json"], ms[victim].ID) {
		t.Errorf("members.json lacks the killed member:\n%s", files["members.json"])
	}
	// --logs takes the processes' log files from the data dir.
	withLogs := filepath.Join(t.TempDir(), "logs.tar.gz")
	if _, code := coordctl(t, eps, "debug", "bundle", "--logs", filepath.Dir(ms[0].DataDir), withLogs); code != 0 {
		t.Fatalf("debug bundle --logs: exit %d", code)
	}
	if lf := readBundle(t, withLogs); !strings.Contains(lf["logs/"+ms[0].ID+"/coordd.log"], "raft") {
		t.Errorf("bundle --logs lacks %s's coordd.log", ms[0].ID)
	}
	// The streaming nodes are in the bundle too: the PChannel and node
	// lists, and each listed live node's own status.
	if _, ok := files["pchannels.json"]; !ok {
		t.Errorf("bundle lacks pchannels.json")
	}
	if _, ok := files["streaming-nodes.json"]; !ok {
		t.Errorf("bundle lacks streaming-nodes.json")
	} else if strings.Contains(files["streaming-nodes.json"], l.StreamingNodes()[0].Addr) {
		found := false
		for name := range files {
			found = found || (strings.HasPrefix(name, "streaming-nodes/") && strings.HasSuffix(name, "/status.json"))
		}
		if !found && !strings.Contains(files["bundle.txt"], "streaming node") {
			t.Errorf("a listed streaming node has neither a status file nor a note in bundle.txt:\n%s", files["bundle.txt"])
		}
	}
	for i, m := range ms {
		dir := "members/" + m.ID + "/"
		if i == victim {
			if _, ok := files[dir+"status.json"]; ok {
				t.Errorf("a status for the killed member %s", m.ID)
			}
			continue
		}
		if !strings.Contains(files[dir+"status.json"], `"node_id": "`+m.ID+`"`) {
			t.Errorf("%sstatus.json: %q", dir, files[dir+"status.json"])
		}
		if !strings.Contains(files[dir+"metrics.txt"], "coordd_") {
			t.Errorf("%smetrics.txt has no coordd metric", dir)
		}
		want := `"level": "debug"`
		if i == 1 {
			want = `"level": "warn"`
		}
		if !strings.Contains(files[dir+"log-level.json"], want) {
			t.Errorf("%slog-level.json: %q", dir, files[dir+"log-level.json"])
		}
		if _, ok := files[dir+"recent-errors.json"]; !ok {
			t.Errorf("%srecent-errors.json missing", dir)
		}
	}
	if !strings.Contains(files["members/"+ms[leader].ID+"/recent-errors.json"], `"level": "error"`) {
		t.Errorf("the leader's recent errors are empty:\n%s", files["members/"+ms[leader].ID+"/recent-errors.json"])
	}

	before, _ := os.ReadFile(file)
	if _, code := coordctl(t, eps, "debug", "bundle", file); code != 1 {
		t.Errorf("existing FILE: exit %d, want 1", code)
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Error("an existing FILE was changed without --force")
	}
	if _, code := coordctl(t, eps, "debug", "bundle", filepath.Join(t.TempDir(), "nodir", "b.tgz")); code != 1 {
		t.Errorf("missing directory: exit %d, want 1", code)
	}
}
