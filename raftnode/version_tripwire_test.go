package raftnode_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reasonedAgainst lists the library versions whose internals parts of this
// package and of its data dir (datadir/) reason about, with the files
// holding that reasoning (paths relative to raftnode/). The
// arguments there (when raft sends or installs a snapshot, what it deletes
// after one, what it does on a stable-store error, how a lease and a
// transfer behave, raft-wal's segment format and its repairs) were read in
// these versions' source and hold only for them.
var reasonedAgainst = []struct {
	module, version string
	files           []string
}{
	{"github.com/hashicorp/raft", "v1.8.0", []string{
		"lease.go", "transfer_guard.go", "stale_snapshot.go", "log_retention.go", "storage_health.go",
		"snapshot_replay.go", "membership.go", "node.go",
		"datadir/log_reach.go", "datadir/stable_wait.go", "datadir/vote_record.go",
	}},
	{"github.com/hashicorp/raft-wal", "v0.4.2", []string{
		"datadir/storage_check_wal.go", "datadir/log_reach.go", "datadir/logstore.go", "datadir/snapshot_cleanup.go",
	}},
}

// TestLibraryVersionsAreTheOnesReasonedAbout fails when go.mod requires
// hashicorp/raft or raft-wal in another version than the one the files above
// were written against: whoever bumps it re-reads those arguments against
// the new source (and the upstream changes between the two), then updates
// the version here.
func TestLibraryVersionsAreTheOnesReasonedAbout(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reasonedAgainst {
		got := requiredVersion(string(mod), r.module)
		if got == "" {
			t.Errorf("go.mod does not require %s: the files that reason about its %s internals (%s) need a look",
				r.module, r.version, strings.Join(r.files, ", "))
			continue
		}
		if got != r.version {
			t.Errorf("go.mod requires %s %s, but raftnode's reasoning about its internals was checked against %s: "+
				"re-read it in %s against %s, then update reasonedAgainst", r.module, got, r.version,
				strings.Join(r.files, ", "), got)
		}
	}
	for _, r := range reasonedAgainst {
		for _, f := range r.files {
			if _, err := os.Stat(f); err != nil {
				t.Errorf("reasonedAgainst names %s for %s, but it is not there (%v): a file that moved or was "+
					"split must stay on the list under its new name", f, r.module, err)
			}
		}
	}
	if strings.Contains(string(mod), "github.com/hashicorp/raft =>") || strings.Contains(string(mod), "github.com/hashicorp/raft-wal =>") {
		t.Error("go.mod replaces hashicorp/raft or raft-wal: the library stays as released (no fork)")
	}
}

// requiredVersion is the version go.mod's require lines give module ("":
// none).
func requiredVersion(mod, module string) string {
	for _, line := range strings.Split(mod, "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return ""
}
