package main

import "testing"

// The flush path has a slot for every SaveBinlogPaths call the fastest row
// may have in flight: fewer, and the row measures the generator's queue.
func TestFlushSlotsCoverTheFastestRow(t *testing.T) {
	for _, c := range []struct {
		factors []float64
		want    int
	}{
		{nil, 64}, {[]float64{1}, 64}, {[]float64{1, 5}, 320}, {[]float64{5, 1}, 320}, {[]float64{0.5}, 64},
	} {
		if got := flushSlots(c.factors); got != c.want {
			t.Errorf("flushSlots(%v) = %d, want %d", c.factors, got, c.want)
		}
	}
	if milvusMax[1].name != "SaveBinlogPaths" {
		t.Fatalf("flushSlots reads milvusMax[1] as SaveBinlogPaths, found %q", milvusMax[1].name)
	}
}
