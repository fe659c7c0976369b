package backup

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/coordd/coordd/fsm"
)

// TestWriteStateRestores: a state written by WriteState opens as a backup
// of that size and validates into the same state.
func TestWriteStateRestores(t *testing.T) {
	st, err := fsm.Synthetic(fsm.SyntheticShape{Segments: 300, Tombstones: 4})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "s.backup")
	n, err := WriteState(path, st, Header{ClusterID: "c", LeaderID: "synthetic", Index: st.AppliedIndex(), Term: 1})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != n {
		t.Fatalf("size %d reported, file %v %v", n, fi, err)
	}
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := Validate(b.Body())
	if err != nil {
		t.Fatal(err)
	}
	if got.AppliedIndex() != st.AppliedIndex() || got.RecordCount() != st.RecordCount() {
		t.Fatalf("restored index %d, %d records; want %d, %d", got.AppliedIndex(), got.RecordCount(), st.AppliedIndex(), st.RecordCount())
	}
	if _, err := WriteState(filepath.Join(t.TempDir(), "missing", "x"), st, Header{}); err == nil {
		t.Fatal("a backup into a missing directory gave no error")
	}
}
