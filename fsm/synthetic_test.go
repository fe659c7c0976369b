package fsm

import (
	"bytes"
	"testing"
)

// TestSyntheticState: the scale benchmarks' state holds every invariant,
// has the requested shape, and survives a snapshot round trip byte for byte
// (so a follower installing it gets the same state).
func TestSyntheticState(t *testing.T) {
	shape := SyntheticShape{Segments: 2000, VChannels: 400, Tombstones: 300}
	s, err := Synthetic(shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	if s.SegmentCount() != 2000 || len(s.Collections()) != 100 || s.TombstoneCount() != 300 {
		t.Fatalf("shape: %d segments, %d collections, %d tombstones; want 2000, 100, 300",
			s.SegmentCount(), len(s.Collections()), s.TombstoneCount())
	}
	data := snapshotBytes(t, s)
	r, err := ReadSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if again := snapshotBytes(t, r); !bytes.Equal(again, data) {
		t.Fatal("snapshot of the restored synthetic state differs")
	}
	again, err := Synthetic(shape)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, again), data) {
		t.Fatal("Synthetic is not deterministic")
	}
}

// TestSyntheticStateSmall: a state smaller than one broadcast's 4
// collections still holds (targets are deduplicated).
func TestSyntheticStateSmall(t *testing.T) {
	s, err := Synthetic(SyntheticShape{Segments: 5, Tombstones: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
}

// TestSyntheticStateScaleShape: the Milvus-max run's shape (bench/scale):
// more PChannels than the default, and manifest pointers on half the
// Flushed segments, still hold every invariant and survive a snapshot.
func TestSyntheticStateScaleShape(t *testing.T) {
	s, err := Synthetic(SyntheticShape{Segments: 2000, VChannels: 512, Tombstones: 64, PChannels: 256, ManifestPointers: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CheckInvariants(); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	if s.PChannelCount() != 256 {
		t.Fatalf("%d PChannels, want 256", s.PChannelCount())
	}
	pointers := 0
	for _, c := range s.Collections() {
		for _, g := range s.SegmentsOfCollection(c.CollectionId) {
			if g.ManifestPath != "" {
				pointers++
			}
		}
	}
	if pointers < 500 {
		t.Fatalf("%d segments have a manifest pointer, want about a third of 2000", pointers)
	}
	r, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if err := r.CheckInvariants(); err != nil {
		t.Fatalf("restored invariants: %v", err)
	}
}
