package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
)

// Asking the members how they are: readiness, status, leader, snapshots,
// replica comparison and their logs.

func (c *Cluster) get(ctx context.Context, i int, path string) ([]byte, int, error) {
	return c.getWith(ctx, c.http, i, path)
}

func (c *Cluster) getWith(ctx context.Context, hc *http.Client, i int, path string) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.scheme+c.members[i].HTTPAddr+path, nil)
	if err != nil {
		return nil, 0, err
	}
	if tok := c.sec.Token(RoleAdmin); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok) // the snapshot needs admin
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp.StatusCode, err
}

// Ready reports whether member i's /readyz answers 200.
func (c *Cluster) Ready(ctx context.Context, i int) bool {
	_, code, err := c.get(ctx, i, "/readyz")
	return err == nil && code == http.StatusOK
}

// WaitReady polls member i's /readyz until it answers 200.
func (c *Cluster) WaitReady(ctx context.Context, i int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if c.Ready(ctx, i) {
			return nil
		}
		if c.State(i) == Stopped {
			return fmt.Errorf("%s is not running (log %s)", c.members[i].ID, c.members[i].LogPath)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %v (log %s)", c.members[i].ID, timeout, c.members[i].LogPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Status is member i's own view of the cluster (GET /v1/cluster/status).
func (c *Cluster) Status(ctx context.Context, i int) (*coordpb.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	b, code, err := c.get(ctx, i, "/v1/cluster/status")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s status: HTTP %d: %s", c.members[i].ID, code, b)
	}
	var st coordpb.StatusResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s status: %w", c.members[i].ID, err)
	}
	return &st, nil
}

// Leader finds the member that reports itself leader in the highest term,
// polling until ctx ends.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	for {
		best, term := -1, uint64(0)
		for i := range c.members {
			if c.State(i) != Running {
				continue
			}
			st, err := c.Status(ctx, i)
			if err == nil && st.State == "Leader" && st.Term >= term {
				best, term = i, st.Term
			}
		}
		if best >= 0 {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no leader found: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Snapshot fetches member i's FSM snapshot (GET /v1/snapshot).
func (c *Cluster) Snapshot(ctx context.Context, i int) ([]byte, error) {
	// Without SnapshotTimeout the status client's 2 s cap applies, as for
	// every small state.
	limit, hc := 10*time.Second, c.http
	if c.cfg.SnapshotTimeout > 0 {
		limit, hc = c.cfg.SnapshotTimeout, c.bulk
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	b, code, err := c.getWith(ctx, hc, i, "/v1/snapshot")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s snapshot: HTTP %d: %s", c.members[i].ID, code, b)
	}
	return b, nil
}

// CheckReplicas waits until every member reports the same applied index,
// fetches every member's FSM snapshot, and compares them byte for byte. It
// retries while the members are still catching up (background leader work
// such as TSO window extensions keeps committing entries), up to timeout.
// The client load must have stopped. The snapshots compared last are
// returned for the report.
func (c *Cluster) CheckReplicas(ctx context.Context, timeout time.Duration) (checker.Result, map[string][]byte) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last checker.Result
	var lastSnaps map[string][]byte
	attempts := 0
	// seen counts why attempts failed, for the report of a run that never
	// converges (the last reason alone hides what the minute was spent on).
	seen := map[string]int{}
	var order []string
	note := func(why string) {
		if seen[why] == 0 {
			order = append(order, why)
		}
		seen[why]++
	}
	for {
		attempts++
		// Each member must have applied what it knows committed; the
		// members may still differ by the few entries background leader
		// work commits (TSO windows, lease barriers, time ticks), so the
		// snapshots are fetched at once and compared at their own applied
		// index (SnapshotsIdentical retries a set taken at different
		// indexes). Requiring one index across members before fetching,
		// then again after, failed for a minute whenever the cluster
		// committed a few entries per second (smoke-broadcast-ops-3 seeds
		// 711301835, 126369037, 210404050).
		if err := c.allApplied(ctx); err != nil {
			last = checker.Result{Checker: "replicas-identical", Verdict: checker.Unknown, Summary: err.Error()}
			note(err.Error())
		} else if snaps, err := c.snapshotsAtOnce(ctx); err != nil {
			last = checker.Result{Checker: "replicas-identical", Verdict: checker.Unknown, Summary: err.Error()}
			note(err.Error())
		} else {
			r, converged := checker.SnapshotsIdentical(snaps)
			last, lastSnaps = r, snaps
			if converged {
				r.Summary += fmt.Sprintf(", %d attempts", attempts)
				return r, snaps
			}
			note(r.Summary)
		}
		select {
		case <-ctx.Done():
			// Never converging after the heal is a failure too (liveness).
			last.Checker = "replicas-identical"
			last.Verdict = checker.Invalid
			last.Details = append(last.Details, fmt.Sprintf("replicas did not converge within %v (%d attempts): %s", timeout, attempts, last.Summary))
			for i, why := range order {
				if i == 8 {
					last.Details = append(last.Details, fmt.Sprintf("... and %d other reasons", len(order)-8))
					break
				}
				last.Details = append(last.Details, fmt.Sprintf("seen %d times: %s", seen[why], why))
			}
			last.Violations++
			return last, lastSnaps
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// snapshotsAtOnce fetches every member's snapshot concurrently.
func (c *Cluster) snapshotsAtOnce(ctx context.Context) (map[string][]byte, error) {
	type got struct {
		id  string
		b   []byte
		err error
	}
	ch := make(chan got, len(c.members))
	for i := range c.members {
		go func() {
			b, err := c.Snapshot(ctx, i)
			ch <- got{c.members[i].ID, b, err}
		}()
	}
	snaps := map[string][]byte{}
	var errs []error
	for range c.members {
		g := <-ch
		if g.err != nil {
			errs = append(errs, fmt.Errorf("%s snapshot: %w", g.id, g.err))
			continue
		}
		snaps[g.id] = g.b
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return snaps, nil
}

// allApplied checks that every member answers and has applied everything
// it knows committed.
func (c *Cluster) allApplied(ctx context.Context) error {
	var desc []string
	lagging := false
	for i := range c.members {
		st, err := c.Status(ctx, i)
		if err != nil {
			return err
		}
		desc = append(desc, fmt.Sprintf("%s applied %d commit %d", st.NodeId, st.AppliedIndex, st.CommitIndex))
		lagging = lagging || st.CommitIndex != st.AppliedIndex
	}
	if lagging {
		return fmt.Errorf("not converged: %s", strings.Join(desc, ", "))
	}
	return nil
}

// CopyLogs copies every member's log into dir.
func (c *Cluster) CopyLogs(dir string) error {
	var errs []error
	for _, m := range c.members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, os.WriteFile(filepath.Join(dir, m.ID+".log"), b, 0o644))
	}
	return errors.Join(errs...)
}

// LogProblems scans the member logs for panics, fatal errors and data
// races.
func (c *Cluster) LogProblems() []string {
	var out []string
	for _, m := range c.members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			continue
		}
		for n, line := range strings.Split(string(b), "\n") {
			for _, pat := range []string{"panic:", "fatal error:", "WARNING: DATA RACE"} {
				if strings.Contains(line, pat) {
					out = append(out, fmt.Sprintf("%s:%d: %s", m.ID, n+1, strings.TrimSpace(line)))
				}
			}
		}
	}
	return out
}

// logCounters are raft log lines counted as coverage: how often the run
// made raft elect, install snapshots, and so on.
var logCounters = []struct{ name, pattern string }{
	{"elections_won", "election won"},
	{"snapshot_installs", "Installed remote snapshot"},
	{"snapshots_taken", "snapshot complete up to"},
	{"prevote_failed", "pre-vote campaign failed"},
}

// LogCounts counts coverage events in the member logs.
func (c *Cluster) LogCounts() map[string]int {
	out := map[string]int{}
	for _, m := range c.members {
		b, err := os.ReadFile(m.LogPath)
		if err != nil {
			continue
		}
		s := string(b)
		for _, lc := range logCounters {
			out[lc.name] += strings.Count(s, lc.pattern)
		}
	}
	return out
}
