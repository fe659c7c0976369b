package raftnode

import (
	"io"
	"testing"

	"github.com/hashicorp/raft"
)

// listedSnapshots is a SnapshotStore that only lists (newest first).
type listedSnapshots []uint64

func (l listedSnapshots) List() ([]*raft.SnapshotMeta, error) {
	var out []*raft.SnapshotMeta
	for _, i := range l {
		out = append(out, &raft.SnapshotMeta{Index: i})
	}
	return out, nil
}

func (listedSnapshots) Create(raft.SnapshotVersion, uint64, uint64, raft.Configuration, uint64, raft.Transport) (raft.SnapshotSink, error) {
	panic("not used")
}

func (listedSnapshots) Open(string) (*raft.SnapshotMeta, io.ReadCloser, error) { panic("not used") }

// TestRetainingLogStoreClampsOnlyCompaction: raft's compaction stops at the
// older snapshot; deleting a conflicting suffix, and compaction with a
// single snapshot, pass through.
func TestRetainingLogStoreClampsOnlyCompaction(t *testing.T) {
	for _, tc := range []struct {
		name      string
		snaps     listedSnapshots
		lo, hi    uint64
		wantFirst uint64 // first index left
		wantLast  uint64
	}{
		{"compaction past the older snapshot stops there", listedSnapshots{150, 60}, 1, 120, 61, 200},
		{"compaction below the older snapshot is untouched", listedSnapshots{150, 60}, 1, 40, 41, 200},
		{"one snapshot: nothing to keep", listedSnapshots{150}, 1, 120, 121, 200},
		{"a conflicting suffix is deleted whole", listedSnapshots{150, 60}, 180, 200, 1, 179},
		{"the whole log before an installed snapshot goes", listedSnapshots{250, 150}, 1, 200, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := raft.NewInmemStore()
			for i := uint64(1); i <= 200; i++ {
				if err := inner.StoreLog(&raft.Log{Index: i, Term: 1}); err != nil {
					t.Fatal(err)
				}
			}
			s := &retainingLogStore{LogStore: inner, snaps: tc.snaps}
			if err := s.DeleteRange(tc.lo, tc.hi); err != nil {
				t.Fatal(err)
			}
			first, _ := inner.FirstIndex()
			last, _ := inner.LastIndex()
			if first != tc.wantFirst || last != tc.wantLast {
				t.Fatalf("log %d..%d after DeleteRange(%d, %d), want %d..%d", first, last, tc.lo, tc.hi, tc.wantFirst, tc.wantLast)
			}
		})
	}
}
