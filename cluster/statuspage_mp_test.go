package cluster_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/testutil"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite docs/status-page.png from the status-page test")

// chromiumPath finds Debian's chromium; the test is skipped only when it is
// genuinely absent (.ci/run installs it, so CI always runs the test).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it): the status page is not tested in a browser")
	return ""
}

// chromium runs headless Chromium once with args (plus the flags that keep
// it off the network and out of the user's profile) and returns stdout. A
// slow browser on a loaded machine is an error to retry, not a failure:
// the caller decides within its own deadline.
func chromium(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(60*time.Second))
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 20))
	}
	return string(out), nil
}

// pageComplete is the marker the status page writes last: a DOM without it
// is a rendering Chromium cut short, to be taken again.
const pageComplete = `id="page-complete"`

// renderDOM dumps page's DOM, retrying until it is complete (the marker
// is there) or the deadline passes.
func renderDOM(t *testing.T, bin, page string, deadline time.Time) (string, error) {
	t.Helper()
	var lastErr error
	for attempt := 0; ; attempt++ {
		dom, err := chromium(t, bin, "--dump-dom", page)
		switch {
		case err != nil:
			lastErr = err
		case !strings.Contains(dom, pageComplete):
			lastErr = fmt.Errorf("incomplete DOM (no %s marker, %d bytes)", pageComplete, len(dom))
		default:
			return dom, nil
		}
		if time.Now().After(deadline) {
			return dom, fmt.Errorf("after %d attempts: %w", attempt+1, lastErr)
		}
	}
}

// screenshot writes page as a small PNG (only with -update-screenshot).
func screenshot(t *testing.T, bin, page, png string) { screenshotSized(t, bin, page, png, "1000,640") }

// screenshotSized is screenshot in a window of size ("W,H").
func screenshotSized(t *testing.T, bin, page, png, size string) {
	t.Helper()
	deadline := time.Now().Add(testutil.Timeout(90 * time.Second))
	for {
		_, err := chromium(t, bin, "--hide-scrollbars", "--window-size="+size, "--screenshot="+png, page)
		if err == nil {
			if fi, serr := os.Stat(png); serr == nil && fi.Size() > 0 {
				t.Logf("wrote %s (%d bytes)", png, fi.Size())
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("screenshot %s not written: %v", png, err)
		}
	}
}

func docsPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "docs", name)
}

// TestStatusPageInChromium: a live three-member cluster with one streaming
// node; a follower's /ui, rendered by headless Chromium, names the leader
// the cluster reports, marks exactly that member as leader, and shows every
// PChannel under the streaming node that holds it, ASSIGNED, in its term.
func TestStatusPageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	// Raft timings for a loaded machine: with the LAN defaults a busy
	// 2-core box holds an election every few seconds, faster than
	// Chromium renders a page, and no rendering could match the cluster.
	args := append(append([]string(nil), channelArgs...),
		"--heartbeat-timeout", "1s", "--election-timeout", "1s", "--leader-lease-timeout", "500ms")
	// Insecure on purpose (an explicit plaintext variant): the headless
	// browser can neither trust the test CA nor send a token.
	l := startInsecureClusterWith(t, cluster.LauncherConfig{ExtraArgs: args, StreamingNodes: 1})
	c, err := client.New(context.Background(), secured(l, client.Config{Endpoints: strings.Split(l.Endpoints(), ","), RequestTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitPlacement(t, c, 30*time.Second, "all channels assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })
	// Each attempt reads the expected picture again: on a loaded machine an
	// election (a new leader, PChannel terms moved on) may come between
	// two renderings, and the page must match the cluster as it is then.
	// A follower's page is read: it must draw the whole cluster from its
	// own replica and its peers, not only when it is the leader. A
	// follower also applies the last assignment a moment after the leader.
	var page, dom string
	var pageErr error
	deadline := time.Now().Add(testutil.Timeout(120 * time.Second))
	for {
		leader, ps, err := expectedPicture(t, c)
		if err == nil {
			for _, m := range l.Members() {
				if m.ID != leader {
					page = "http://" + m.HTTPAddr + "/ui?refresh=0"
					break
				}
			}
			dom, err = renderDOM(t, bin, page, deadline)
			if err != nil {
				t.Fatalf("status page at %s: %v", page, err)
			}
			pageErr = checkStatusDOM(dom, leader, l.Members(), ps)
			if pageErr == nil {
				break
			}
			// The page is held to the cluster only while the cluster stood
			// still during the rendering.
			if after, _, err := expectedPicture(t, c); err == nil && after != leader {
				pageErr = fmt.Errorf("leadership moved from %s to %s during the rendering (%v)", leader, after, pageErr)
			}
		} else {
			pageErr = err
		}
		if time.Now().After(deadline) {
			t.Fatalf("status page at %s: %v\n--- DOM ---\n%s", page, pageErr, dom)
		}
		time.Sleep(200 * time.Millisecond) // between renderings, not a wait for an event
	}
	if *updateScreenshot {
		screenshot(t, bin, page, docsPath("status-page.png"))
	}
}

// TestStatusPageVerdictScreenshots (only with -update-screenshot) draws the
// verdict line in its three states into docs/: healthy, degraded (a member
// killed) and unavailable (a second one killed: no leader).
func TestStatusPageVerdictScreenshots(t *testing.T) {
	if !*updateScreenshot {
		t.Skip("only with -update-screenshot")
	}
	bin := chromiumPath(t)
	args := append(append([]string(nil), channelArgs...),
		"--heartbeat-timeout", "1s", "--election-timeout", "1s", "--leader-lease-timeout", "500ms")
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: args, StreamingNodes: 2})
	c, err := client.New(context.Background(), client.Config{Endpoints: strings.Split(l.Endpoints(), ","), RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	waitPlacement(t, c, 30*time.Second, "all channels assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })
	page := "http://" + l.Members()[0].HTTPAddr + "/ui?refresh=0"
	shoot := func(level, png string) {
		deadline := time.Now().Add(testutil.Timeout(120 * time.Second))
		for {
			dom, err := renderDOM(t, bin, page, deadline)
			if err == nil && strings.Contains(dom, `data-verdict="`+level+`"`) {
				screenshot(t, bin, page, docsPath(png))
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("page never showed %s: %v", level, err)
			}
			time.Sleep(200 * time.Millisecond) // between renderings
		}
	}
	shoot("healthy", "status-page-healthy.png")
	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	shoot("degraded", "status-page-degraded.png")
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	shoot("unavailable", "status-page-leaderless.png")
}

// expectedPicture is what the page should show now: the leader the
// cluster reports and every PChannel assigned. An error means the cluster
// is between two pictures (no leader, a PChannel being moved).
func expectedPicture(t *testing.T, c *client.Client) (string, map[string]placement, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.Status(ctx)
	if err != nil || st.GetLeaderId() == "" {
		return "", nil, fmt.Errorf("no leader known: %v", err)
	}
	ps := placements(t, c)
	if !allAssigned(ps, 0) {
		return "", nil, fmt.Errorf("not every PChannel is assigned: %v", ps)
	}
	return st.GetLeaderId(), ps, nil
}

// checkStatusDOM checks the rendered DOM against the cluster's own answers.
func checkStatusDOM(dom, leader string, members []cluster.LocalMember, ps map[string]placement) error {
	if !strings.Contains(dom, `<b id="leader">`+leader+`</b>`) {
		shown := "nothing"
		if m := regexp.MustCompile(`<b id="leader">(.*?)</b>`).FindStringSubmatch(dom); m != nil {
			shown = m[1]
		}
		return fmt.Errorf("leader %s not shown (the page shows %s)", leader, shown)
	}
	for _, m := range members {
		want := fmt.Sprintf(`data-member="%s" data-leader="%v"`, m.ID, m.ID == leader)
		if !strings.Contains(dom, want) {
			return fmt.Errorf("member row %q missing", want)
		}
	}
	if n := strings.Count(dom, `data-leader="true"`); n != 1 {
		return fmt.Errorf("%d members marked leader, want 1", n)
	}
	for name, p := range ps {
		re := regexp.MustCompile(fmt.Sprintf(`(?s)<h3 data-node="%d" data-node-state="UP">.*?<tr data-pchannel="%s" data-node="%d" data-state="ASSIGNED" class="ok" data-owner-state="UP">.*?<td class="num">%d</td>`,
			p.node, regexp.QuoteMeta(name), p.node, p.term))
		if !re.MatchString(dom) {
			return fmt.Errorf("pchannel %s not shown ASSIGNED under node %d in term %d", name, p.node, p.term)
		}
	}
	return nil
}
