package datadir

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/hashicorp/raft"
)

// TestWALEmptyTailWithoutFile: raft-wal lists a new segment before it
// creates the file, so a crash or a full disk in between leaves a listed
// tail that is missing or shorter than its preallocation, with no entries.
// The check accepts it (raft-wal creates it on open) and the log goes on.
func TestWALEmptyTailWithoutFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(path string) error
	}{
		{"tail file missing", os.Remove},
		{"tail file empty", func(p string) error { return os.WriteFile(p, nil, 0o644) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, err := openWAL(dir, 2<<10, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A suffix deletion seals the tail and lists a new, empty one.
			for i := uint64(1); i <= 5; i++ {
				if err := w.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: make([]byte, 200)}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.DeleteRange(5, 5); err != nil {
				t.Fatal(err)
			}
			idx := uint64(4)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			files := walFiles(t, dir)
			if err := tc.cut(files[len(files)-1]); err != nil {
				t.Fatal(err)
			}
			var rep storageReport
			log, err := checkWAL(dir, &rep)
			if err != nil {
				t.Fatalf("check: %v", err)
			}
			if log.last != idx || rep.lastIndex != idx {
				t.Fatalf("log ends at %d (report %d), want %d", log.last, rep.lastIndex, idx)
			}
			w, err = openWAL(dir, 2<<10, nil)
			if err != nil {
				t.Fatalf("raft-wal open: %v", err)
			}
			defer w.Close()
			if err := w.StoreLogs([]*raft.Log{{Index: idx + 1, Term: 1, Data: []byte("next")}}); err != nil {
				t.Fatalf("append after reopening: %v", err)
			}
		})
	}
}

func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	ms, err := filepath.Glob(filepath.Join(dir, WALDir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(ms)
	return ms
}
