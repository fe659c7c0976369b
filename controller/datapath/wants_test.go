package datapath

import (
	"slices"
	"testing"
	"time"
)

func TestCheckpointWants(t *testing.T) {
	var w checkpointWants
	t0 := time.Unix(1000, 0)
	if got := w.wanted([]string{"a"}, t0); got != nil {
		t.Fatalf("nothing wanted yet, got %v", got)
	}
	w.want([]string{"a", "b"}, t0)
	if got := w.wanted([]string{"b", "c", "a"}, t0.Add(time.Second)); !slices.Equal(got, []string{"b", "a"}) {
		t.Fatalf("wanted = %v, want [b a]", got)
	}
	if got := w.wanted([]string{"a", "b"}, t0.Add(checkpointWantTTL+time.Millisecond)); got != nil {
		t.Fatalf("expired wants still wanted: %v", got)
	}
	if len(w.until) != 0 {
		t.Fatalf("expired wants not forgotten: %v", w.until)
	}
}
