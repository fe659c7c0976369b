package datadir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// tmpSnapshotDirs lists the temporary snapshot directories under dir.
func tmpSnapshotDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), snapshotTmpSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func createSnapshot(t *testing.T, st *Storage, index uint64) raft.SnapshotSink {
	t.Helper()
	sink, err := st.snaps.Create(raft.SnapshotVersionMax, index, 2, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatalf("create snapshot: %v", err)
	}
	if _, err := sink.Write([]byte("state")); err != nil {
		t.Fatalf("write snapshot: %v", err)
	}
	return sink
}

// TestFailedSnapshotLeavesNoTmpDir: a snapshot whose completion fails
// (here its metadata cannot be written: a directory stands where the file
// goes) leaves no temporary directory behind — raft's file store kept it,
// and on a full disk one more piled up every snapshot interval — and the
// failure is reported until a snapshot succeeds.
func TestFailedSnapshotLeavesNoTmpDir(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStorage(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sink := createSnapshot(t, st, 10)
	meta := filepath.Join(dir, "snapshots", sink.ID()+snapshotTmpSuffix, "meta.json")
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(meta, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(meta, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err == nil {
		t.Fatal("Close succeeded without its metadata")
	}
	if left := tmpSnapshotDirs(t, dir); len(left) > 0 {
		t.Fatalf("a failed snapshot left %v", left)
	}
	if f, ok := st.SnapshotFault().Fault(WriteSnapshot); !ok || !strings.Contains(f.Error(), "cannot write a snapshot") {
		t.Fatalf("fault after a failed snapshot: %v %v", f, ok)
	}

	// A cancelled one goes too, and one that completes ends the fault.
	if err := createSnapshot(t, st, 11).Cancel(); err != nil {
		t.Fatal(err)
	}
	if err := createSnapshot(t, st, 12).Close(); err != nil {
		t.Fatal(err)
	}
	if left := tmpSnapshotDirs(t, dir); len(left) > 0 {
		t.Fatalf("left %v", left)
	}
	if f, ok := st.SnapshotFault().Fault(WriteSnapshot); ok {
		t.Fatalf("fault %v after a snapshot succeeded", f)
	}
	if metas, err := st.snaps.List(); err != nil || len(metas) != 1 || metas[0].Index != 12 {
		t.Fatalf("snapshots %v %v, want the one at index 12", metas, err)
	}
}

// TestStaleTmpSnapshotDirsRemovedAtStart: temporary snapshot directories
// an earlier run left (it crashed or ran out of space mid-snapshot) are
// removed when the data dir is opened; complete snapshots stay.
func TestStaleTmpSnapshotDirsRemovedAtStart(t *testing.T) {
	dir := t.TempDir()
	st, err := openTestStorage(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := createSnapshot(t, st, 5).Close(); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, name := range []string{"2-7-1700000000000.tmp", "2-9-1700000000001.tmp"} {
		p := filepath.Join(dir, "snapshots", name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "state.bin"), make([]byte, 80<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	st, err = openTestStorage(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if left := tmpSnapshotDirs(t, dir); len(left) > 0 {
		t.Fatalf("start-up left %v", left)
	}
	if metas, err := st.snaps.List(); err != nil || len(metas) != 1 || metas[0].Index != 5 {
		t.Fatalf("snapshots %v %v, want the one at index 5", metas, err)
	}
}
