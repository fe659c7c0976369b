package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/testutil"
)

// TestStartLogsAndReaps: output is appended to the log after the banner
// (a restart keeps the earlier run), the tee sees it too, and onExit has
// the exit error before Done closes.
func TestStartLogsAndReaps(t *testing.T) {
	log := filepath.Join(t.TempDir(), "sub", "c.log")
	var exitErr error
	var tee testutil.Buffer
	for run, script := range []string{"echo first", "echo second; exit 3"} {
		c, err := Start(Spec{Name: "c", Path: "sh", Args: []string{"-c", script}, Log: log,
			Banner: "=== run", Tee: &tee, DieWithParent: run == 1}, func(err error) { exitErr = err })
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("child not reaped")
		}
	}
	if exitErr == nil || !strings.Contains(exitErr.Error(), "exit status 3") {
		t.Errorf("onExit got %v; want exit status 3", exitErr)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if want := "=== run\nfirst\n=== run\nsecond\n"; string(b) != want {
		t.Errorf("log = %q; want %q", b, want)
	}
	if got := tee.String(); got != "first\nsecond\n" {
		t.Errorf("tee = %q; want both runs' output without banners", got)
	}
}

// TestStartChildKill: Kill on a started child ends it and Done closes.
func TestStartChildKill(t *testing.T) {
	c, err := Start(Spec{Name: "sleeper", Path: "sh", Args: []string{"-c", "exec sleep 60"}, Log: filepath.Join(t.TempDir(), "s.log")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Kill(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Spec{Name: "missing", Path: filepath.Join(t.TempDir(), "no-such-binary"), Log: filepath.Join(t.TempDir(), "m.log")}, nil); err == nil || !strings.Contains(err.Error(), "start missing") {
		t.Errorf("Start of a missing binary = %v; want a start error naming it", err)
	}
}
