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
	"sync"
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
	return startDevProc(t, dir, base, args...).banner
}

// devProc is a running `coordd dev`: its banner, and its output so far.
type devProc struct {
	banner string
	exited chan struct{}
	mu     sync.Mutex
	out    strings.Builder
}

// output is everything coordd dev printed so far.
func (d *devProc) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.out.String()
}

// pid is the PID the banner gives for process name ("sn1", "n2", ...).
func (d *devProc) pid(t *testing.T, name string) int {
	t.Helper()
	for _, line := range strings.Split(d.banner, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != name {
			continue
		}
		for i := range f[:len(f)-1] {
			if f[i] == "pid" {
				var pid int
				if _, err := fmt.Sscan(f[i+1], &pid); err == nil && pid > 0 {
					return pid
				}
			}
		}
	}
	t.Fatalf("banner gives no pid for %s:\n%s", name, d.banner)
	return 0
}

func startDevProc(t *testing.T, dir string, base int, args ...string) *devProc {
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
	d := &devProc{exited: make(chan struct{})}
	go func() { cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-d.exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("--- output of coordd dev (last %d lines) ---\n%s", evidenceTail, tail(d.output(), evidenceTail))
		}
		keepEvidence(t, logsUnder(dir))
	})
	up := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			d.mu.Lock()
			d.out.WriteString(sc.Text() + "\n")
			text := d.out.String()
			d.mu.Unlock()
			if strings.HasPrefix(sc.Text(), "try:") {
				up <- text
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case d.banner = <-up:
		return d
	case <-d.exited:
		t.Fatalf("coordd dev exited before it was up:\n%s", d.output())
	case <-time.After(testutil.Timeout(60 * time.Second)):
		t.Fatal("coordd dev was not up in time")
	}
	return nil
}

// TestDevSupervisesAStreamingNodeKill: a fresh `coordd dev` (3 members, 2
// streaming nodes, default --min-rebalance-interval 5m) spreads the 16
// PChannels 8/8 within seconds; SIGKILL of one streaming node is reported
// with its exit status while the dev process, the members and the other
// node keep running, and the killed node's PChannels move to the survivor
// after its TTL.
func TestDevSupervisesAStreamingNodeKill(t *testing.T) {
	dir := t.TempDir()
	base := freeBasePort(t, 3)
	d := startDevProc(t, dir, base, "--streaming-nodes", "2")
	for _, want := range []string{"log " + filepath.Join(dir, "sn1", "streamingnode.log"), "log " + filepath.Join(dir, "n1", "coordd.log")} {
		if !strings.Contains(d.banner, want) {
			t.Fatalf("banner does not say %q:\n%s", want, d.banner)
		}
	}
	var eps []string
	for i := 0; i < 3; i++ {
		eps = append(eps, fmt.Sprintf("127.0.0.1:%d", base+i))
	}
	c, err := client.New(context.Background(), client.Config{Endpoints: eps, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	sn1Addr, sn2Addr := fmt.Sprintf("127.0.0.1:%d", base+200), fmt.Sprintf("127.0.0.1:%d", base+201)
	// Balanced from the first minute: 8/8, long before the 5m interval
	// would allow a rebalance.
	var sn1, sn2 uint64
	waitPlacement(t, c, testutil.Timeout(30*time.Second), "16 pchannels spread 8/8 over both streaming nodes", func(ps map[string]placement) bool {
		sn1, sn2 = liveNodeID(t, c, sn1Addr), liveNodeID(t, c, sn2Addr)
		if sn1 == 0 || sn2 == 0 || !allAssigned(ps, 0) {
			return false
		}
		per := map[uint64]int{}
		for _, p := range ps {
			per[p.node]++
		}
		// 8/8 is the steady state: while a node holds fewer than its
		// floor share the balancer keeps filling it.
		return per[sn1] == 8 && per[sn2] == 8
	})

	// A manual rebalance of a balanced placement says so.
	if out, code := coordctlPlain(t, strings.Join(eps, ","), "pchannel", "rebalance"); code != 0 || !strings.Contains(out, "Nothing moved: placement is balanced") {
		t.Fatalf("pchannel rebalance: exit %d: %s", code, out)
	}

	if err := syscall.Kill(d.pid(t, "sn1"), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, testutil.Timeout(10*time.Second), 20*time.Millisecond, "coordd dev reports sn1's exit", func() bool {
		return strings.Contains(d.output(), "sn1 exited: signal: killed")
	})
	waitPlacement(t, c, testutil.Timeout(60*time.Second), "every pchannel moved to sn2", func(ps map[string]placement) bool {
		if !allAssigned(ps, sn1) {
			return false
		}
		for _, p := range ps {
			if p.node != sn2 {
				return false
			}
		}
		return true
	})
	select {
	case <-d.exited:
		t.Fatalf("coordd dev exited after a streaming node died:\n%s", d.output())
	default:
	}
	for _, ep := range eps {
		mc, err := client.New(context.Background(), client.Config{Endpoints: []string{ep}, RequestTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = mc.Status(ctx)
		cancel()
		mc.Close()
		if err != nil {
			t.Fatalf("member at %s stopped answering after the streaming node kill: %v", ep, err)
		}
	}
	if st, err := snStatusWith(context.Background(), sn2Addr, client.StreamingNodeDialOptions(nil)); err != nil { // coordd dev: plaintext
		t.Fatalf("sn2 stopped answering: %v (status %v)", err, st)
	}
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

// TestDevRestartsADeadStreamingNode: with --restart, a SIGKILLed streaming
// node is reported, started again after --restart-delay (a new process,
// a new node ID at the same address) and takes the PChannels back.
func TestDevRestartsADeadStreamingNode(t *testing.T) {
	dir := t.TempDir()
	base := freeBasePort(t, 1)
	d := startDevProc(t, dir, base, "--nodes", "1", "--streaming-nodes", "1", "--restart", "--restart-delay", "200ms")
	c, err := client.New(context.Background(), client.Config{Endpoints: []string{fmt.Sprintf("127.0.0.1:%d", base)}, RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	addr := fmt.Sprintf("127.0.0.1:%d", base+200)
	var first uint64
	waitPlacement(t, c, testutil.Timeout(30*time.Second), "every pchannel on sn1", func(ps map[string]placement) bool {
		first = liveNodeID(t, c, addr)
		return first != 0 && allAssigned(ps, 0)
	})
	pid := d.pid(t, "sn1")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyEvery(t, testutil.Timeout(30*time.Second), 20*time.Millisecond, "coordd dev restarts sn1", func() bool {
		out := d.output()
		return strings.Contains(out, "sn1 exited: signal: killed") && strings.Contains(out, "restarted sn1 (pid ")
	})
	var again uint64
	waitPlacement(t, c, testutil.Timeout(60*time.Second), "every pchannel on the restarted sn1", func(ps map[string]placement) bool {
		again = liveNodeID(t, c, addr)
		if again == 0 || again == first || !allAssigned(ps, first) {
			return false
		}
		for _, p := range ps {
			if p.node != again {
				return false
			}
		}
		return true
	})
}
