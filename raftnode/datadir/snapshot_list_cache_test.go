package datadir

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// countingSnapshots counts the List calls that reach the real store.
type countingSnapshots struct {
	raft.SnapshotStore
	lists int
}

func (c *countingSnapshots) List() ([]*raft.SnapshotMeta, error) {
	c.lists++
	return c.SnapshotStore.List()
}

func writeSnapshot(t *testing.T, s raft.SnapshotStore, index uint64, cancel bool) {
	t.Helper()
	sink, err := s.Create(raft.SnapshotVersionMax, index, 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("state")); err != nil {
		t.Fatal(err)
	}
	if cancel {
		err = sink.Cancel()
	} else {
		err = sink.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func newestIndexOf(t *testing.T, s raft.SnapshotStore) uint64 {
	t.Helper()
	metas, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) == 0 {
		return 0
	}
	return metas[0].Index
}

func TestSnapshotListCacheFollowsEverySnapshot(t *testing.T) {
	files, err := raft.NewFileSnapshotStoreWithLogger(t.TempDir(), 2, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	inner := &countingSnapshots{SnapshotStore: files}
	c := newSnapshotCache(inner)

	if got := newestIndexOf(t, c); got != 0 {
		t.Fatalf("empty store: newest %d", got)
	}
	for range 5 {
		newestIndexOf(t, c)
	}
	if inner.lists != 1 {
		t.Fatalf("6 Lists without a snapshot reached the store %d times, want 1", inner.lists)
	}

	writeSnapshot(t, c, 10, false)
	if got := newestIndexOf(t, c); got != 10 {
		t.Fatalf("after the snapshot at 10: newest %d", got)
	}
	writeSnapshot(t, c, 20, false)
	writeSnapshot(t, c, 30, false) // reaps the one at 10 (retain 2)
	metas, err := c.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 2 || metas[0].Index != 30 || metas[1].Index != 20 {
		t.Fatalf("after reaping: %d snapshots, want 30 then 20", len(metas))
	}

	before := inner.lists
	writeSnapshot(t, c, 40, true) // a cancelled snapshot still drops the cache
	if got := newestIndexOf(t, c); got != 30 || inner.lists != before+1 {
		t.Fatalf("after a cancelled snapshot: newest %d, store lists %d (want 30, %d)", got, inner.lists, before+1)
	}

	metas[0].Index = 999 // a caller's copy
	if got := newestIndexOf(t, c); got != 30 {
		t.Fatalf("a caller changing its list changed the cache: newest %d", got)
	}
}
