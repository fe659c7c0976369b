package commands

import (
	"path/filepath"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// TestGoldenOldVersions: log bytes written by an older body version (kept
// in testdata/golden_old when a type's version was raised) still decode, as
// that version, to the body they held.
func TestGoldenOldVersions(t *testing.T) {
	t.Run("SaveBinlogPaths v1", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "SaveBinlogPaths.v1.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeSaveBinlogPaths || cs[0].Version != 1 {
			t.Fatalf("decoded %+v", cs)
		}
		b := cs[0].Body.(*logpb.SaveBinlogPaths)
		if b.AfterDml || b.SegmentId != 449326400 || !b.Flushed {
			t.Fatalf("v1 body %v", b)
		}
	})
}
