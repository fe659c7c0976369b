package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/testutil"
)

// TestDevStartsFlushers: `coordd dev` (what `make run` runs) starts its
// streaming nodes with their flushers writing binlogs to <data-dir>/objects
// and serving their metrics: rows inserted and flushed against it are in
// the binlogs there, once, and the streaming node's metrics count them.
func TestDevStartsFlushers(t *testing.T) {
	dir := t.TempDir()
	base := freeBasePort(t, 1)
	banner := startDev(t, dir, base, "--nodes", "1", "--streaming-nodes", "1")
	objects := filepath.Join(dir, "objects")
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", base+1200)
	if !strings.Contains(banner, "file://"+objects) || !strings.Contains(banner, metricsURL) {
		t.Fatalf("banner does not name the object store %s and metrics %s:\n%s", objects, metricsURL, banner)
	}
	c, err := client.New(context.Background(), client.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", base)}, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitPlacement(t, c, 30*time.Second, "every pchannel assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })
	store, err := objectstore.Open(context.Background(), objects)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	newCollection(t, c, 301, 2)
	a := insertRows(t, c, 301, 400)
	flushAndWait(t, c, 301, 60*time.Second)
	checkExactlyOnce(t, persistedRows(t, c, store, 301), a)
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// Rows reach binlogs by the flush or, if it came late, partly by the
	// periodic partial save before it.
	var written float64
	for _, kind := range []string{"flush", "partial"} {
		var v float64
		line := grepLines(string(body), `coordd_flusher_rows_written_total{kind="`+kind+`"} `)
		if _, err := fmt.Sscanf(line, `coordd_flusher_rows_written_total{kind="`+kind+`"} %g`, &v); err != nil {
			t.Fatalf("metrics: %q: %v", line, err)
		}
		written += v
	}
	if written != 400 {
		t.Fatalf("the streaming node's metrics count %v rows written, want 400:\n%s", written, grepLines(string(body), "coordd_flusher_rows"))
	}
}

// startDev runs `coordd dev` with data dir dir and base port base (plus
// args), stops it with SIGINT at cleanup, and returns its banner once it
// prints the "try:" line that says the cluster is up.
func startDev(t *testing.T, dir string, base int, args ...string) string {
	t.Helper()
	cmd := exec.Command(coorddBinary, append([]string{"dev", "--data-dir", dir, "--base-port", fmt.Sprint(base),
		"--streamingnode-binary", streamingBinary}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	up := make(chan string, 1)
	go func() {
		var text strings.Builder
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			text.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "try:") {
				up <- text.String()
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case banner := <-up:
		return banner
	case <-exited:
		t.Fatal("coordd dev exited before it was up")
	case <-time.After(testutil.Timeout(60 * time.Second)):
		t.Fatal("coordd dev was not up in time")
	}
	return ""
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
