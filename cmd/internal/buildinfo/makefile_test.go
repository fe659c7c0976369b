package buildinfo

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Review D5: a binary built the way `make build` builds it names its
// commit and build time, even where the environment says
// GOFLAGS=-buildvcs=false (the newcomer's machine: `coordd --version`
// printed "(devel)" and no commit). The test takes the Makefile's own
// command for coordctl (make -n), runs it with that environment, and asks
// the binary.
func TestMakeBuildStampsCommitAndBuildTime(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"make", "git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: %v", tool, err)
		}
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing to stamp", err)
	}
	bin := t.TempDir()
	dry := exec.Command("make", "-s", "-n", "build", "BIN="+bin)
	dry.Dir = root
	out, err := dry.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "./cmd/coordctl") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("make -n build has no command for ./cmd/coordctl:\n%s", out)
	}
	before := time.Now().UTC().Add(-time.Minute)
	build := exec.Command("sh", "-c", line)
	build.Dir = root
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	out, err = exec.Command(filepath.Join(bin, "coordctl"), "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("coordctl version -o json: %v", err)
	}
	var in Info
	if err := json.Unmarshal(out, &in); err != nil {
		t.Fatalf("coordctl version -o json: %v\n%s", err, out)
	}
	// Another commit may land while the binary builds (a shared checkout).
	headAfter, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if (in.Commit != strings.TrimSpace(string(head)) && in.Commit != strings.TrimSpace(string(headAfter))) || in.CommitTime == "" {
		t.Errorf("commit %q (committed %q), want %s:\n%s", in.Commit, in.CommitTime, head, out)
	}
	if in.Version == "(devel)" || in.Version == "" {
		t.Errorf("version %q: want the module version Go derives from the commit", in.Version)
	}
	built, err := time.Parse(time.RFC3339, in.BuiltAt)
	if err != nil || built.Before(before.Truncate(time.Second)) || built.After(time.Now().Add(time.Minute)) {
		t.Errorf("built_at %q (%v): want this build's time, after %s", in.BuiltAt, err, before.Format(time.RFC3339))
	}
}

func TestTextWithoutStampSaysHow(t *testing.T) {
	got := Info{Program: "coordd", Version: "(devel)", Go: "go1 linux/amd64", LogFormat: "f"}.Text()
	for _, want := range []string{"commit:     unknown (built without VCS stamping: build with 'make build'", "built:      unknown"} {
		if !strings.Contains(got, want) {
			t.Fatalf("%q lacks %q", got, want)
		}
	}
	got = Info{Program: "coordd", Version: "v0.0.0-x", Commit: "abc", CommitTime: "2026-12-05T07:59:38Z", Modified: true, BuiltAt: "2026-12-06T10:00:00Z"}.Text()
	for _, want := range []string{"commit:     abc (modified), committed 2026-12-05T07:59:38Z", "built:      2026-12-06T10:00:00Z"} {
		if !strings.Contains(got, want) {
			t.Fatalf("%q lacks %q", got, want)
		}
	}
}
