package scenario

import (
	"testing"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/fsm"
)

// TestWritePreloadIsARestorableBackup: the preloaded state is written as
// a backup file whose checksum verifies and whose header names the state's
// index, with an ID floor above every ID the state holds (what `coordd
// restore --id-floor` requires).
func TestWritePreloadIsARestorableBackup(t *testing.T) {
	shape := fsm.SyntheticShape{Segments: 500, VChannels: 40, PChannels: 4, ManifestPointers: true}
	pf, err := writePreload(t.TempDir(), shape)
	if err != nil {
		t.Fatal(err)
	}
	st, err := fsm.Synthetic(shape)
	if err != nil {
		t.Fatal(err)
	}
	if pf.IDFloor <= st.NextID() || pf.Index != st.AppliedIndex() || pf.Segments != 500 || pf.Bytes <= 512 {
		t.Fatalf("preload %+v for a state at index %d with next ID %d", pf, st.AppliedIndex(), st.NextID())
	}
	f, err := backup.Open(pf.Path)
	if err != nil {
		t.Fatalf("the preload backup does not verify: %v", err)
	}
	defer f.Close()
	if f.Header.Index != pf.Index {
		t.Fatalf("backup header index %d, want %d", f.Header.Index, pf.Index)
	}
}
