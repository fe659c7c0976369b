package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coordd/coordd/cluster"
)

// A multi-process test's processes log under t.TempDir, which the testing
// package deletes when the test ends, pass or fail; a failure message that
// names such a log ("member n1 not ready within 30s (log: ...)") would
// point at nothing. So every helper that starts a process keeps its log
// when the test failed: copied to a directory under os.TempDir (named in
// the test's output) and its tail printed.

// evidenceTail is how many lines of each log a failed test prints.
const evidenceTail = 60

// processLog is one process's log file.
type processLog struct {
	name, path string
}

// launcherLogs lists the log of every process l plans.
func launcherLogs(l *cluster.Launcher) []processLog {
	var logs []processLog
	for _, m := range l.Members() {
		logs = append(logs, processLog{m.ID, l.LogPath(m.ID)})
	}
	for _, sn := range l.StreamingNodes() {
		logs = append(logs, processLog{sn.Name, l.LogPath(sn.Name)})
	}
	return logs
}

// logsUnder lists the process logs a launcher writes under dir (each
// process's data dir is a child of it): what `coordd dev --data-dir dir`
// leaves.
func logsUnder(dir string) []processLog {
	var logs []processLog
	for _, name := range []string{"coordd.log", "streamingnode.log"} {
		found, _ := filepath.Glob(filepath.Join(dir, "*", name))
		for _, path := range found {
			logs = append(logs, processLog{filepath.Base(filepath.Dir(path)), path})
		}
	}
	return logs
}

// keepEvidence does nothing when t passed. When it failed, it keeps the
// logs (keepLogs). Call it from a cleanup, after the processes stopped, so
// the logs are complete.
func keepEvidence(t *testing.T, logs []processLog) {
	t.Helper()
	if t.Failed() {
		keepLogs(t.Name(), logs, t.Logf)
	}
}

// keepLogs copies each log that exists into a new directory under
// os.TempDir, which outlives the test, prints (logf) each one's last
// evidenceTail lines and where it was kept, and returns the directory
// ("" if it could not be made; the tails are printed anyway).
func keepLogs(test string, logs []processLog, logf func(format string, args ...any)) string {
	kept, err := os.MkdirTemp("", "coordd-evidence-"+fileSafe(test)+"-")
	if err != nil {
		logf("keeping the logs of the failed test: %v", err)
		kept = ""
	}
	for _, lg := range logs {
		b, err := os.ReadFile(lg.path)
		if err != nil {
			continue // never started
		}
		where := lg.path + " (deleted with the test's temporary directory)"
		if kept != "" {
			dst := filepath.Join(kept, fileSafe(lg.name)+"-"+filepath.Base(lg.path))
			if err := os.WriteFile(dst, b, 0o644); err == nil {
				where = dst
			}
		}
		logf("--- log of %s, kept at %s (last %d lines) ---\n%s", lg.name, where, evidenceTail, tail(string(b), evidenceTail))
	}
	if kept != "" {
		logf("the logs of this failed test are kept in %s", kept)
	}
	return kept
}

var unsafeInName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// fileSafe turns a test or process name into one path element.
func fileSafe(name string) string { return unsafeInName.ReplaceAllString(name, "_") }

// TestKeepLogsOutlivesTheTest: a failed test's logs are copied out of its
// temporary directory, each with its tail printed and where it was kept;
// a log that was never written is skipped.
func TestKeepLogsOutlivesTheTest(t *testing.T) {
	log := filepath.Join(t.TempDir(), "coordd.log")
	var lines []string
	for i := 0; i < 2*evidenceTail; i++ {
		lines = append(lines, fmt.Sprintf("line %d", i))
	}
	content := strings.Join(lines, "\n")
	if err := os.WriteFile(log, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	kept := keepLogs(t.Name(), []processLog{{"n1", log}, {"sn1", filepath.Join(t.TempDir(), "streamingnode.log")}},
		func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) })
	if kept == "" {
		t.Fatalf("nothing kept; output:\n%s", out.String())
	}
	t.Cleanup(func() { os.RemoveAll(kept) })
	if got, err := os.ReadFile(filepath.Join(kept, "n1-coordd.log")); err != nil || string(got) != content {
		t.Fatalf("kept copy of n1's log: %v", err)
	}
	if !strings.Contains(out.String(), tail(content, evidenceTail)) || strings.Contains(out.String(), lines[evidenceTail-1]+"\n") ||
		!strings.Contains(out.String(), kept) || strings.Contains(out.String(), "sn1") {
		t.Fatalf("printed evidence:\n%s", out.String())
	}
}
