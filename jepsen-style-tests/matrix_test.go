package jepsen

import (
	"strings"
	"testing"
)

// TestScaleTemplatesOnlyInFullMatrix: the smoke matrix (what `go test`
// runs) starts every cluster empty; the scale template runs, preloaded with
// at least 100k segments and its member waits scaled, in the first
// ScaleRuns rounds of the full matrix, and every full scenario name is
// unique (JEPSEN_SCENARIO finds one).
func TestScaleTemplatesOnlyInFullMatrix(t *testing.T) {
	for _, s := range Smoke() {
		if s.Preload != nil || strings.HasPrefix(s.Name, "scale-") {
			t.Errorf("smoke scenario %s is preloaded: the smoke matrix must not run the scale templates", s.Name)
		}
	}
	names := map[string]bool{}
	var scale []string
	for _, s := range Full() {
		if names[s.Name] {
			t.Errorf("full scenario %s twice", s.Name)
		}
		names[s.Name] = true
		if s.Preload == nil {
			continue
		}
		scale = append(scale, s.Name)
		if s.Preload.Segments < 100_000 || s.ReadyTimeout <= 0 || s.SnapshotTimeout <= 0 {
			t.Errorf("%s: %d segments, ready timeout %v, snapshot timeout %v", s.Name, s.Preload.Segments, s.ReadyTimeout, s.SnapshotTimeout)
		}
	}
	want := []string{"scale-100k-3-r01", "scale-100k-3-r02", "scale-100k-3-r03"}
	if strings.Join(scale, " ") != strings.Join(want, " ") {
		t.Errorf("preloaded full scenarios %v, want %v", scale, want)
	}
	if _, full, ok := Find("scale-100k-3-r01"); !ok || !full {
		t.Errorf("scale-100k-3-r01: found %v, in the full matrix %v", ok, full)
	}
}
