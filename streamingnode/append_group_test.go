package streamingnode

import (
	"fmt"
	"sync"
	"testing"
)

// TestConcurrentAppendsShareFsync: concurrent Append RPCs to one PChannel
// are written in batches (the slot is held only while each record's
// timestamp order is fixed), so they share fdatasyncs, and the log still
// holds every record once with timestamps increasing. Old code held the
// slot across each fdatasync: one per append.
func TestConcurrentAppendsShareFsync(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	if err := n.assign(t, "dml_0", 2, 3); err != nil {
		t.Fatal(err)
	}
	const callers, each = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := n.append("dml_0_1v0", 0, fmt.Sprintf("g%d-%d", g, i), 0); err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	msgs := n.readAll(t, "dml_0_1v0", 0)
	if len(msgs) != callers*each {
		t.Fatalf("%d records, want %d", len(msgs), callers*each)
	}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Timestamp <= msgs[i-1].Timestamp || msgs[i].Id.Offset != msgs[i-1].Id.Offset+1 {
			t.Fatalf("record %d: offset %d ts %d after offset %d ts %d", i, msgs[i].Id.Offset, msgs[i].Timestamp, msgs[i-1].Id.Offset, msgs[i-1].Timestamp)
		}
	}
	sl := n.slotFor("dml_0", false)
	sl.mu.Lock()
	syncs := sl.w.Syncs()
	sl.mu.Unlock()
	if syncs >= callers*each {
		t.Fatalf("%d fdatasyncs for %d concurrent appends: none shared", syncs, callers*each)
	}
	t.Logf("%d appends, %d fdatasyncs", callers*each, syncs)
}
