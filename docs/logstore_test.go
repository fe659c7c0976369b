package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// logStoreDocs are the texts that state which raft log store a data dir
// uses: each must say that a new data dir gets raft-wal (cmd/coordd's
// --raft-log-store default, datadir.DefaultLogStore, since 2026-12-05;
// bolt stays the store of a data dir that records it).
var logStoreDocs = []string{
	"README.md",
	"docs/architecture.md",
	"docs/operations.md",
	"raftnode/doc.go",
	"raftnode/datadir/doc.go",
}

var (
	// saysWALDefault: a sentence giving a new data dir raft-wal.
	saysWALDefault = regexp.MustCompile(`(?i)\bwal\b.*\bnew (data dir|one)\b|\bnew data dir\b.*\bwal\b`)
	// saysBolt: a sentence naming bolt (raft-boltdb, BoltDB).
	saysBolt = regexp.MustCompile(`(?i)\bbolt(db)?\b|raft-boltdb`)
	// aboutNewOrDefault: a sentence about a new data dir or the default.
	aboutNewOrDefault = regexp.MustCompile(`(?i)\bnew data dir\b|\bdefault log store\b|\blog store\b[^.]*\bdefault\b`)
	mentionsWAL       = regexp.MustCompile(`(?i)\bwal\b|raft-wal`)
)

// sentences splits a Markdown or Go file's prose into sentences: Go
// comment markers and line breaks go, a sentence ends at ". ".
func sentences(text string) []string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		line = strings.TrimPrefix(line, "//")
		if line == "" {
			b.WriteString(". ") // a blank line ends a sentence too
			continue
		}
		b.WriteString(line + " ")
	}
	return strings.Split(b.String(), ". ")
}

// logStoreProblems lists what text gets wrong about the log store default:
// a sentence about a new data dir or the default that names bolt but not
// raft-wal, and, when mustState, no sentence giving a new data dir
// raft-wal.
func logStoreProblems(text string, mustState bool) []string {
	var out []string
	stated := false
	for _, s := range sentences(text) {
		if saysWALDefault.MatchString(s) {
			stated = true
		}
		if saysBolt.MatchString(s) && aboutNewOrDefault.MatchString(s) && !mentionsWAL.MatchString(s) {
			out = append(out, "gives bolt as the store of a new data dir or the default: "+strings.TrimSpace(s))
		}
	}
	if mustState && !stated {
		out = append(out, "never says a new data dir keeps its log in raft-wal")
	}
	return out
}

// TestLogStoreDefaultStated: README.md, the architecture and operations
// docs and the package docs of raftnode and raftnode/datadir each say a
// new data dir gets raft-wal, and no Markdown file or package doc says it
// gets bolt.
func TestLogStoreDefaultStated(t *testing.T) {
	must := map[string]bool{}
	for _, f := range logStoreDocs {
		must[filepath.FromSlash(f)] = true
	}
	files := []string{}
	for _, f := range sourceFiles(t) {
		if strings.HasSuffix(f, ".md") || filepath.Base(f) == "doc.go" {
			files = append(files, f)
		}
	}
	seen := 0
	for _, path := range files {
		rel, _ := filepath.Rel(repoRoot, path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if must[rel] {
			seen++
		}
		for _, p := range logStoreProblems(string(data), must[rel]) {
			t.Errorf("%s %s", rel, p)
		}
	}
	if seen != len(logStoreDocs) {
		t.Errorf("found %d of the %d files that must state the default (%v)", seen, len(logStoreDocs), logStoreDocs)
	}
}

// TestLogStoreCheckCanFail: the check sees bolt given as a new data dir's
// store, and a text that never states the default.
func TestLogStoreCheckCanFail(t *testing.T) {
	for _, tc := range []struct {
		text      string
		mustState bool
		problems  int
	}{
		{"// Package x keeps the raft log in raft-boltdb for a new data dir.\npackage x\n", false, 1},
		{"The default log store is bolt (raft.db).", false, 1},
		{"Logs live in raft.db.", true, 1},
		{"A new data dir keeps its log in raft-wal segments; one that records bolt keeps raft.db.", true, 0},
		{"`wal/` (on the `wal` log store, the default for a new data dir): segments.\n\nbolt's freelist is rewritten on every commit.", true, 0},
	} {
		if got := logStoreProblems(tc.text, tc.mustState); len(got) != tc.problems {
			t.Errorf("logStoreProblems(%q) = %q, want %d problems", tc.text, got, tc.problems)
		}
	}
}
