package cluster_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/binlog"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/testutil"
	"github.com/coordd/coordd/vocab"
)

// The write path end to end: rows inserted through the streaming nodes'
// write path, flushed by the reference flusher into binlogs in the object
// store, recorded by coordd; every inserted row must be in exactly one
// Flushed segment's binlogs, whatever is killed on the way.

var flushArgs = append(append([]string{}, channelArgs...), "--segment-check-interval", "200ms", "--segment-assignment-expiration", "1s")

// flushSNArgs: the flushers save growing segments every 300 ms, so the
// flushes of these tests (and the recoveries after kills) meet segments
// that already hold partial saves.
var flushSNArgs = []string{"--flusher-save-interval", "300ms"}

func startFlushCluster(t *testing.T, streamingNodes int) (*cluster.Launcher, *client.Client, objectstore.Store) {
	t.Helper()
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: flushArgs, StreamingNodes: streamingNodes, StreamingExtraArgs: flushSNArgs})
	// These tests check that every row is persisted exactly once whatever
	// is killed, not how soon a leader is back: on a loaded machine raft's
	// 200 ms timeouts can leave the cluster without a stable leader for
	// tens of seconds after a kill, so a call rides that out (retries
	// bounded by its time, not a count), within the scaled bounds.
	c, err := client.New(context.Background(), secured(l, client.Config{Endpoints: strings.Split(l.Endpoints(), ","),
		RequestTimeout: testutil.Timeout(60 * time.Second), MaxRetries: math.MaxInt32}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	store, err := objectstore.Open(context.Background(), filepath.Join(filepath.Dir(l.WALDir()), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	waitPlacement(t, c, 30*time.Second, "every pchannel assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })
	return l, c, store
}

func newCollection(t *testing.T, c *client.Client, coll int64, shards uint32) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(10*time.Second))
	defer cancel()
	vs, err := c.AllocVirtualChannels(ctx, coll, shards, "")
	if err != nil {
		t.Fatalf("create collection %d: %v", coll, err)
	}
	return vs
}

func insertRows(t *testing.T, c *client.Client, coll int64, rows uint32) *client.InsertResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(60*time.Second))
	defer cancel()
	res, err := c.Insert(ctx, coll, 0, rows, 500)
	if err != nil {
		t.Fatalf("insert %d rows: %v", rows, err)
	}
	if res.Count != rows || res.LastPK-res.FirstPK+1 != int64(rows) {
		t.Fatalf("insert result %+v", res)
	}
	return res
}

func flushAndWait(t *testing.T, c *client.Client, coll int64, timeout time.Duration) *coordpb.FlushResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(timeout))
	defer cancel()
	f, err := c.Flush(ctx, coll)
	if err != nil {
		t.Fatalf("flush: %v", err)
	}
	var last *coordpb.GetFlushStateResponse
	if _, err := c.WaitFlushed(ctx, f, 100*time.Millisecond, func(st *coordpb.GetFlushStateResponse) { last = st }); err != nil {
		t.Fatalf("wait for flush_ts %d: %v (last state %v)", f.FlushTs, err, last)
	}
	return f
}

// persistedRows reads the binlogs of every Flushed segment of coll:
// pk -> number of times persisted, and checks each segment's row count.
func persistedRows(t *testing.T, c *client.Client, store objectstore.Store, coll int64) map[int64]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(30*time.Second))
	defer cancel()
	segs, err := c.ListSegments(ctx, &coordpb.ListSegmentsRequest{CollectionId: coll, State: "Flushed"})
	if err != nil {
		t.Fatal(err)
	}
	count := map[int64]int{}
	for _, s := range segs {
		info, err := c.GetSegmentInfo(ctx, []int64{s.SegmentId}, false)
		if err != nil {
			t.Fatal(err)
		}
		rows := 0
		for _, p := range info.Segments[0].BinlogPaths {
			data, err := store.Get(ctx, p)
			if err != nil {
				t.Fatalf("segment %d: %v", s.SegmentId, err)
			}
			obj, err := binlog.Decode(data)
			if err != nil {
				t.Fatalf("segment %d, %s: %v", s.SegmentId, p, err)
			}
			for _, r := range obj.Rows {
				count[r.PK]++
			}
			rows += len(obj.Rows)
		}
		if int64(rows) != s.NumOfRows {
			t.Fatalf("segment %d: %d rows in its binlogs, %d recorded", s.SegmentId, rows, s.NumOfRows)
		}
	}
	return count
}

func checkExactlyOnce(t *testing.T, count map[int64]int, ranges ...*client.InsertResult) {
	t.Helper()
	want := 0
	for _, r := range ranges {
		for pk := r.FirstPK; pk <= r.LastPK; pk++ {
			if count[pk] != 1 {
				t.Fatalf("pk %d is in %d Flushed segments' binlogs, want exactly 1", pk, count[pk])
			}
		}
		want += int(r.Count)
	}
	if len(count) != want {
		t.Fatalf("%d distinct pks persisted, %d inserted", len(count), want)
	}
}

func TestInsertFlushExactlyOnce(t *testing.T) {
	_, c, store := startFlushCluster(t, 2)
	vs := newCollection(t, c, 101, 4)
	a := insertRows(t, c, 101, 3000)
	// Partial saves: while the segments are still growing the flushers
	// save their rows, so each VChannel's recovery information shows a
	// growing segment with binlogs and a DML position, and a checkpoint
	// (where a recovery would seek) at or past it. Without partial saves
	// the checkpoint stays at the segment's first row until the flush.
	waitPartialSaves(t, c, vs)
	more := insertRows(t, c, 101, 1000) // into the same growing segments
	f := flushAndWait(t, c, 101, 60*time.Second)
	if len(f.SealedSegmentIds) == 0 {
		t.Fatalf("flush sealed nothing: %+v", f)
	}
	checkExactlyOnce(t, persistedRows(t, c, store, 101), a, more)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(30*time.Second))
	defer cancel()
	info, err := c.GetSegmentInfo(ctx, f.SealedSegmentIds, false)
	if err != nil {
		t.Fatal(err)
	}
	multi := 0
	for _, s := range info.Segments {
		if len(s.BinlogPaths) > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Fatalf("no flushed segment holds more than one binlog (partial saves, then the flush's remainder): %v", info.Segments)
	}
	// Rows inserted after the flush go to new segments and are persisted
	// by the next flush, once.
	b := insertRows(t, c, 101, 500)
	flushAndWait(t, c, 101, 60*time.Second)
	checkExactlyOnce(t, persistedRows(t, c, store, 101), a, more, b)
	// A collection nothing was written to flushes too: its VChannels get
	// checkpoints from the flushers' time ticks alone.
	newCollection(t, c, 111, 3)
	flushAndWait(t, c, 111, 30*time.Second)
}

// waitPartialSaves waits until every VChannel in vs has a growing segment
// with saved rows and a checkpoint at or past its DML position.
func waitPartialSaves(t *testing.T, c *client.Client, vs []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(30*time.Second))
	defer cancel()
	for _, v := range vs {
		var last *coordpb.GetRecoveryInfoResponse
		for {
			info, err := c.GetRecoveryInfo(ctx, v)
			if err == nil {
				last = info
				saved := false
				for _, s := range info.Unflushed {
					if s.State == "Growing" && s.NumOfRows > 0 && s.DmlPosition != nil && info.SeekPosition != nil &&
						info.SeekPosition.Offset > s.DmlPosition.Offset {
						saved = true
					}
				}
				if saved {
					break
				}
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%s: no partial save of a growing segment with the checkpoint past it (last recovery info %v, error %v)", v, last, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// TestStreamingNodeKillMidFlush: SIGKILL the streaming node that owns a
// PChannel right after Flush; coordd moves its PChannels, the new owner
// recovers from GetRecoveryInfo with the replay filter and the flush
// completes with every row persisted once. The old owner's (node, term)
// can no longer save binlogs.
func TestStreamingNodeKillMidFlush(t *testing.T) {
	l, c, store := startFlushCluster(t, 2)
	vs := newCollection(t, c, 102, 4)
	a := insertRows(t, c, 102, 2000)
	before := placements(t, c)
	victimID := before[vocab.PChannelOf(vs[0])].node
	victim := -1
	for i, sn := range l.StreamingNodes() {
		if liveNodeID(t, c, sn.Addr) == victimID {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("no streaming node has id %d", victimID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(90*time.Second))
	defer cancel()
	f, err := c.Flush(ctx, 102)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.KillStreamingNode(victim); err != nil {
		t.Fatal(err)
	}
	waitPlacement(t, c, 30*time.Second, "the victim's pchannels moved", func(ps map[string]placement) bool { return allAssigned(ps, victimID) })
	if _, err := c.WaitFlushed(ctx, f, 100*time.Millisecond, nil); err != nil {
		t.Fatalf("flush after the kill: %v", err)
	}
	checkExactlyOnce(t, persistedRows(t, c, store, 102), a)

	// A late SaveBinlogPaths from the old owner (its node and old PChannel
	// term) is refused and changes nothing, for a Flushed segment and for
	// a growing one.
	b := insertRows(t, c, 102, 200)
	var old placement
	var oldV string
	asNode := nodeClient(t, l)
	for _, v := range vs {
		if p := before[vocab.PChannelOf(v)]; p.node == victimID {
			old, oldV = p, v
			break
		}
	}
	segs, err := c.ListSegments(ctx, &coordpb.ListSegmentsRequest{CollectionId: 102, Vchannel: oldV})
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]int{}
	for _, s := range segs {
		if s.State != "Flushed" && s.State != "Growing" {
			continue
		}
		checked[s.State]++
		beforeInfo, err := c.GetSegmentInfo(ctx, []int64{s.SegmentId}, false)
		if err != nil {
			t.Fatal(err)
		}
		// With the old owner's own credential: refused by the term, not by
		// authorisation.
		_, err = asNode(victim).SaveBinlogPaths(ctx, &coordpb.SaveBinlogPathsRequest{NodeId: victimID, Vchannel: oldV, PchannelTerm: old.term,
			SegmentId: s.SegmentId, CollectionId: 102, Level: "L1", Flushed: true,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: binlog.PKFieldID, Binlogs: []*coordpb.Binlog{{LogId: 1, EntriesNum: 1}}}},
			Checkpoints:  []*coordpb.SegmentCheckpoint{{SegmentId: s.SegmentId, Position: &coordpb.Position{Term: old.term, Offset: 1 << 40, Timestamp: 1 << 62}, NumOfRows: 1}}})
		if err == nil {
			t.Fatalf("a SaveBinlogPaths from the old owner (node %d, term %d) of segment %d (%s) was accepted", victimID, old.term, s.SegmentId, s.State)
		}
		afterInfo, err := c.GetSegmentInfo(ctx, []int64{s.SegmentId}, false)
		if err != nil {
			t.Fatal(err)
		}
		x, y := beforeInfo.Segments[0], afterInfo.Segments[0]
		if x.State != y.State || x.NumOfRows != y.NumOfRows || len(x.BinlogPaths) != len(y.BinlogPaths) || x.GetDmlPosition().GetTimestamp() != y.GetDmlPosition().GetTimestamp() {
			t.Fatalf("the refused save changed segment %d: %v -> %v", s.SegmentId, x, y)
		}
	}
	if checked["Flushed"] == 0 || checked["Growing"] == 0 {
		t.Fatalf("the late save was tried on %v segments of %s; want Flushed and Growing ones", checked, oldV)
	}
	flushAndWait(t, c, 102, 60*time.Second)
	checkExactlyOnce(t, persistedRows(t, c, store, 102), a, b)
}

// TestLeaderKillMidFlush: SIGKILL the coordd leader right after Flush;
// the new leader finishes the flush (its allocations and ticks start
// afresh) and every row is persisted once.
func TestLeaderKillMidFlush(t *testing.T) {
	l, c, store := startFlushCluster(t, 2)
	newCollection(t, c, 103, 4)
	a := insertRows(t, c, 103, 2000)
	// A bound for a failing run only (a passing one takes seconds): after
	// the kill a loaded machine may elect for tens of seconds, and an idle
	// flusher reports a checkpoint nobody asked for once a minute.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(3*time.Minute))
	defer cancel()
	f, err := c.Flush(ctx, 103)
	if err != nil {
		t.Fatal(err)
	}
	leader := leaderIndex(t, l, dialAll(t, l), -1)
	if err := l.Signal(leader, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitFlushed(ctx, f, 100*time.Millisecond, nil); err != nil {
		t.Fatalf("flush after the leader was killed: %v", err)
	}
	checkExactlyOnce(t, persistedRows(t, c, store, 103), a)
}
