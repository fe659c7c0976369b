package datadir

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// lastUnreadable is a log whose store reports a last index it cannot read,
// as raft-wal does with an empty tail segment after a segment whose
// entries are gone.
type lastUnreadable struct{ *raft.InmemStore }

func (*lastUnreadable) LastIndex() (uint64, error) { return 19, nil }

// TestUnreadableLastEntryIsDamage: raft fails to start on a log store whose
// last entry cannot be read ("failed to get last log at index 19"); the
// start-up check refuses it first, in one line naming the index, so the
// member is refused with the repair instead of exiting with raft's error
// (seen in the Jepsen-style zero-wal-tail damage).
func TestUnreadableLastEntryIsDamage(t *testing.T) {
	logs := &lastUnreadable{InmemStore: raft.NewInmemStore()}
	err := checkEntries("DIR", WALDir+"/", logs, raft.NewInmemStore(), storageReport{})
	var de *DamagedError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "says its last entry is 19 but cannot read it") {
		t.Fatalf("checkEntries = %v, want a DamagedError naming entry 19", err)
	}
	ok := raft.NewInmemStore()
	if err := ok.StoreLogs([]*raft.Log{{Index: 1, Term: 1}, {Index: 2, Term: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := checkEntries("DIR", RaftDBFile, ok, raft.NewInmemStore(), storageReport{firstIndex: 1, lastIndex: 2}); err != nil {
		t.Fatalf("a readable log: %v", err)
	}
}
