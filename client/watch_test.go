package client_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
	"github.com/coordd/coordd/testutil"
)

// Builders for assignment updates.

func ver(g, l uint64) *coordpb.Version { return &coordpb.Version{Global: g, Local: l} }

func snode(id uint64, state string) *coordpb.StreamingNode {
	return &coordpb.StreamingNode{Id: id, Address: fmt.Sprintf("127.0.0.1:%d", 21000+id), State: state, Epoch: 1}
}

func chn(name string, term int64, state string, node uint64) *coordpb.ChannelAssignment {
	return &coordpb.ChannelAssignment{Pchannel: name, Term: term, State: state, NodeId: node, AccessMode: "RW"}
}

func update(full bool, v *coordpb.Version, nodes []*coordpb.StreamingNode, chans ...*coordpb.ChannelAssignment) *coordpb.AssignmentUpdate {
	return &coordpb.AssignmentUpdate{Version: v, Full: full, Cchannel: "dml_0_vcchan", Nodes: nodes, Channels: chans}
}

func nodes(ns ...*coordpb.StreamingNode) []*coordpb.StreamingNode { return ns }

var errBroken = status.Error(codes.Unavailable, "injected: stream broken")

// startWatcher runs a watcher on c until the test ends.
func startWatcher(t *testing.T, c *client.Client) *client.Watcher {
	t.Helper()
	w := c.NewWatcher()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	return w
}

// waitVersion waits (up to 5 s) until w holds exactly v; a newer version
// fails the test.
func waitVersion(t *testing.T, w *client.Watcher, v client.Version) *client.AssignmentView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var last client.Version
	for {
		view, err := w.WaitNewer(ctx, last)
		if err != nil {
			got := "none"
			if cur := w.View(); cur != nil {
				got = versionText(cur.Version)
			}
			t.Fatalf("waiting for version %s: %v (holding %s)", versionText(v), err, got)
		}
		if view.Version == v {
			return view
		}
		if v.Less(view.Version) {
			t.Fatalf("waiting for version %s, got newer %s", versionText(v), versionText(view.Version))
		}
		last = view.Version
	}
}

func versionText(v client.Version) string {
	return fmt.Sprintf("%d.%d", v.Global, v.Local)
}

// monitorMonotonic polls w.View until the test ends and fails if the held
// version ever moves backwards or a held view changes afterwards.
func monitorMonotonic(t *testing.T, w *client.Watcher) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var last client.Version
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if v := w.View(); v != nil {
				if v.Version.Less(last) {
					t.Errorf("version went back from %v to %v", last, v.Version)
				}
				last = v.Version
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

func nodeIDs(v *client.AssignmentView) []uint64 {
	var out []uint64
	for id := range v.Nodes {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func wantChannel(t *testing.T, v *client.AssignmentView, name string, term int64, state string, node uint64) {
	t.Helper()
	c, ok := v.Channels[name]
	if !ok {
		t.Fatalf("version %v: channel %s missing", v.Version, name)
	}
	if c.Term != term || c.State != state || c.NodeId != node {
		t.Fatalf("version %v: channel %s = term %d %s on %d, want term %d %s on %d", v.Version, name, c.Term, c.State, c.NodeId, term, state, node)
	}
}

// (a) A full view, then deltas merged into it: a DOWN node is removed,
// channel records are replaced, and views handed out never change.
func TestWatcherMergesDeltas(t *testing.T) {
	fc := clienttest.Start(t, 1)
	feed := make(chan *coordpb.AssignmentUpdate)
	fc.Nodes[0].ScriptWatch(clienttest.WatchStream{
		// A delta before any full view has no base: it is dropped.
		Updates: []*coordpb.AssignmentUpdate{update(false, ver(4, 9), nodes(snode(8, "UP")), chn("dml_8", 1, "ASSIGNED", 8))},
		Feed:    feed,
	})
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	w := startWatcher(t, c)
	if w.View() != nil {
		t.Fatal("a view before any update")
	}

	feed <- update(true, ver(5, 1), nodes(snode(1, "UP"), snode(2, "UP")),
		chn("dml_0", 1, "ASSIGNED", 1), chn("dml_1", 1, "ASSIGNED", 2), chn("dml_2", 3, "ASSIGNED", 2))
	v1 := waitVersion(t, w, client.Version{Global: 5, Local: 1})
	if got := nodeIDs(v1); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("nodes %v after the full view", got)
	}
	if _, ok := v1.Channels["dml_8"]; ok || len(v1.Channels) != 3 || v1.CChannel != "dml_0_vcchan" {
		t.Fatalf("full view: %d channels %v, cchannel %q", len(v1.Channels), v1.Channels, v1.CChannel)
	}

	// Node 2 goes DOWN; dml_1 is being moved to node 1.
	feed <- update(false, ver(5, 2), nodes(snode(2, "DOWN")), chn("dml_1", 2, "ASSIGNING", 1))
	v2 := waitVersion(t, w, client.Version{Global: 5, Local: 2})
	if got := nodeIDs(v2); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("nodes %v after node 2 went DOWN", got)
	}
	wantChannel(t, v2, "dml_0", 1, "ASSIGNED", 1) // untouched by the delta
	wantChannel(t, v2, "dml_1", 2, "ASSIGNING", 1)
	wantChannel(t, v2, "dml_2", 3, "ASSIGNED", 2) // not in the delta: kept as it was

	// Node 3 joins; channel records are replaced, a new one is added.
	feed <- update(false, ver(5, 3), nodes(snode(3, "UP")),
		chn("dml_1", 2, "ASSIGNED", 1), chn("dml_2", 4, "ASSIGNED", 3), chn("dml_3", 1, "UNINITIALIZED", 0))
	v3 := waitVersion(t, w, client.Version{Global: 5, Local: 3})
	if got := nodeIDs(v3); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("nodes %v", got)
	}
	wantChannel(t, v3, "dml_1", 2, "ASSIGNED", 1)
	wantChannel(t, v3, "dml_2", 4, "ASSIGNED", 3)
	wantChannel(t, v3, "dml_3", 1, "UNINITIALIZED", 0)
	if len(v3.Channels) != 4 {
		t.Fatalf("%d channels, want 4", len(v3.Channels))
	}

	// A newer full view replaces everything held.
	feed <- update(true, ver(6, 1), nodes(snode(3, "DRAINING")), chn("dml_2", 5, "ASSIGNED", 3))
	v4 := waitVersion(t, w, client.Version{Global: 6, Local: 1})
	if got := nodeIDs(v4); !slices.Equal(got, []uint64{3}) || len(v4.Channels) != 1 || v4.Nodes[3].State != "DRAINING" {
		t.Fatalf("after a full view: nodes %v, channels %v", got, v4.Channels)
	}

	// Views handed out earlier were not modified by later updates.
	if got := nodeIDs(v1); !slices.Equal(got, []uint64{1, 2}) || len(v1.Channels) != 3 {
		t.Fatalf("first view changed: nodes %v, %d channels", got, len(v1.Channels))
	}
	wantChannel(t, v1, "dml_1", 1, "ASSIGNED", 2)
	wantChannel(t, v2, "dml_2", 3, "ASSIGNED", 2)
	if w.View() != v4 {
		t.Fatal("View is not the newest view")
	}
}

// (b) Updates at an older or equal version are ignored, within a stream
// and after reconnecting to a lagging member that starts with an older
// full view.
func TestWatcherIgnoresOlderVersions(t *testing.T) {
	fc := clienttest.Start(t, 2)
	ahead, lagging := fc.Nodes[0], fc.Nodes[1]
	base := update(true, ver(5, 3), nodes(snode(1, "UP"), snode(2, "UP")),
		chn("dml_0", 2, "ASSIGNED", 1), chn("dml_1", 2, "ASSIGNED", 2))
	ahead.ScriptWatch(clienttest.WatchStream{
		Updates: []*coordpb.AssignmentUpdate{
			base,
			// Equal version, different content.
			update(false, ver(5, 3), nodes(snode(2, "DOWN")), chn("dml_0", 9, "UNAVAILABLE", 1)),
			// Older, same global.
			update(false, ver(5, 2), nodes(snode(7, "UP")), chn("dml_7", 1, "ASSIGNED", 7)),
			// Older global, larger local: a full view of an earlier leader.
			update(true, ver(4, 99), nodes(snode(9, "UP")), chn("dml_9", 1, "ASSIGNED", 9)),
			// Newer: accepted.
			update(false, ver(5, 4), nil, chn("dml_1", 3, "ASSIGNING", 1)),
		},
		End: errBroken,
	})
	lagFeed := make(chan *coordpb.AssignmentUpdate)
	lagging.ScriptWatch(clienttest.WatchStream{
		Updates: []*coordpb.AssignmentUpdate{
			// The lagging member's full view is older than what we hold.
			update(true, ver(5, 2), nodes(snode(1, "UP"), snode(6, "UP")), chn("dml_0", 1, "ASSIGNED", 6)),
			update(false, ver(5, 4), nodes(snode(1, "DOWN")), chn("dml_0", 1, "UNAVAILABLE", 6)),
		},
		Feed: lagFeed,
	})
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	w := startWatcher(t, c)
	monitorMonotonic(t, w)

	v := waitVersion(t, w, client.Version{Global: 5, Local: 4})
	wantChannel(t, v, "dml_0", 2, "ASSIGNED", 1)
	wantChannel(t, v, "dml_1", 3, "ASSIGNING", 1)
	if got := nodeIDs(v); !slices.Equal(got, []uint64{1, 2}) || len(v.Channels) != 2 {
		t.Fatalf("ignored updates leaked in: nodes %v, channels %v", got, v.Channels)
	}

	// The lagging member is asked for what follows our version; its older
	// full view and equal delta do not replace what we hold.
	testutil.Eventually(t, "the watcher to reach the lagging member", func() bool { return lagging.OpenWatches() == 1 })
	lagFeed <- update(false, ver(5, 5), nil, chn("dml_1", 3, "ASSIGNED", 1))
	v = waitVersion(t, w, client.Version{Global: 5, Local: 5})
	wantChannel(t, v, "dml_0", 2, "ASSIGNED", 1)
	wantChannel(t, v, "dml_1", 3, "ASSIGNED", 1)
	if got := nodeIDs(v); !slices.Equal(got, []uint64{1, 2}) || len(v.Channels) != 2 {
		t.Fatalf("lagging member's view leaked in: nodes %v, channels %v", got, v.Channels)
	}
	if froms := lagging.WatchFroms(); len(froms) != 1 || !proto.Equal(froms[0], ver(5, 4)) {
		t.Fatalf("lagging member got from_version %v, want [5.4]", froms)
	}
}

// (c) After the stream breaks the watcher resumes from the version it
// holds, on the next endpoint (skipping a dead one), and comes back round.
func TestWatcherResumesAndFailsOver(t *testing.T) {
	fc := clienttest.Start(t, 2)
	n1, n2 := fc.Nodes[0], fc.Nodes[1]
	n1.ScriptWatch(
		clienttest.WatchStream{Updates: []*coordpb.AssignmentUpdate{
			update(true, ver(7, 1), nodes(snode(1, "UP")), chn("dml_0", 1, "ASSIGNED", 1)),
			update(false, ver(7, 2), nodes(snode(2, "UP")), chn("dml_1", 1, "ASSIGNED", 2)),
		}, End: errBroken},
		clienttest.WatchStream{Updates: []*coordpb.AssignmentUpdate{
			update(false, ver(7, 4), nodes(snode(2, "DOWN")), chn("dml_1", 2, "ASSIGNING", 1)),
		}},
	)
	n2.ScriptWatch(clienttest.WatchStream{Updates: []*coordpb.AssignmentUpdate{
		update(false, ver(7, 3), nil, chn("dml_0", 2, "ASSIGNED", 1)),
	}, End: clienttest.ErrEndStream})
	c := newClient(t, client.Config{Endpoints: []string{n1.Addr, clienttest.DownAddr(t), n2.Addr}})
	w := startWatcher(t, c)

	v := waitVersion(t, w, client.Version{Global: 7, Local: 4})
	if got := nodeIDs(v); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("nodes %v", got)
	}
	wantChannel(t, v, "dml_0", 2, "ASSIGNED", 1)
	wantChannel(t, v, "dml_1", 2, "ASSIGNING", 1)

	f1, f2 := n1.WatchFroms(), n2.WatchFroms()
	if len(f1) != 2 || f1[0] != nil || !proto.Equal(f1[1], ver(7, 3)) {
		t.Fatalf("n1 from_versions %v, want [none 7.3]", f1)
	}
	if len(f2) != 1 || !proto.Equal(f2[0], ver(7, 2)) {
		t.Fatalf("n2 from_versions %v, want [7.2]", f2)
	}
}

// (c) A member that dies mid-stream: the watcher resumes on another.
func TestWatcherSurvivesMemberCrash(t *testing.T) {
	fc := clienttest.Start(t, 2)
	n1, n2 := fc.Nodes[0], fc.Nodes[1]
	n1.ScriptWatch(clienttest.WatchStream{Updates: []*coordpb.AssignmentUpdate{
		update(true, ver(3, 10), nodes(snode(1, "UP")), chn("dml_0", 1, "ASSIGNED", 1)),
	}})
	n2.ScriptWatch(clienttest.WatchStream{Updates: []*coordpb.AssignmentUpdate{
		update(false, ver(3, 11), nil, chn("dml_0", 1, "UNAVAILABLE", 1)),
	}})
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	w := startWatcher(t, c)
	waitVersion(t, w, client.Version{Global: 3, Local: 10})
	n1.Stop()
	v := waitVersion(t, w, client.Version{Global: 3, Local: 11})
	wantChannel(t, v, "dml_0", 1, "UNAVAILABLE", 1)
	if f := n2.WatchFroms(); len(f) != 1 || !proto.Equal(f[0], ver(3, 10)) {
		t.Fatalf("n2 from_versions %v, want [3.10]", f)
	}
}

// (d) WaitNewer returns only for a strictly newer version and honours ctx.
func TestWatcherWaitNewer(t *testing.T) {
	fc := clienttest.Start(t, 1)
	feed := make(chan *coordpb.AssignmentUpdate)
	fc.Nodes[0].ScriptWatch(clienttest.WatchStream{Feed: feed})
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	w := startWatcher(t, c)

	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 60*time.Millisecond)
	}
	ctx, cancel := short()
	if v, err := w.WaitNewer(ctx, client.Version{}); !errors.Is(err, context.DeadlineExceeded) || v != nil {
		t.Fatalf("before any view: %v, %v", v, err)
	}
	cancel()
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := w.WaitNewer(ctx, client.Version{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled ctx: %v", err)
	}

	feed <- update(true, ver(2, 5), nodes(snode(1, "UP")))
	held := waitVersion(t, w, client.Version{Global: 2, Local: 5})

	// Already newer than the argument: returns at once.
	ctx, cancel = short()
	if v, err := w.WaitNewer(ctx, client.Version{Global: 2, Local: 4}); err != nil || v != held {
		t.Fatalf("WaitNewer(2.4) = %v, %v", v, err)
	}
	if v, err := w.WaitNewer(ctx, client.Version{Global: 1, Local: 99}); err != nil || v != held {
		t.Fatalf("WaitNewer(1.99) = %v, %v", v, err)
	}
	cancel()

	// Equal: blocks; an equal and an older update do not wake it.
	type result struct {
		v   *client.AssignmentView
		err error
	}
	got := make(chan result, 1)
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	go func() {
		v, err := w.WaitNewer(wctx, client.Version{Global: 2, Local: 5})
		got <- result{v, err}
	}()
	feed <- update(false, ver(2, 5), nodes(snode(2, "UP")))
	feed <- update(false, ver(2, 4), nodes(snode(3, "UP")))
	feed <- update(true, ver(1, 50), nodes(snode(4, "UP")))
	select {
	case r := <-got:
		t.Fatalf("WaitNewer(2.5) returned %v, %v for updates no newer than 2.5", r.v, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	feed <- update(false, ver(2, 6), nodes(snode(5, "UP")))
	r := <-got
	if r.err != nil || r.v.Version != (client.Version{Global: 2, Local: 6}) {
		t.Fatalf("WaitNewer(2.5) = %v, %v", r.v, r.err)
	}
	if ids := nodeIDs(r.v); !slices.Equal(ids, []uint64{1, 5}) {
		t.Fatalf("nodes %v, want [1 5]", ids)
	}

	// A version ahead of what is held: waits for one beyond it.
	go func() {
		v, err := w.WaitNewer(wctx, client.Version{Global: 3, Local: 0})
		got <- result{v, err}
	}()
	feed <- update(false, ver(2, 7), nil)
	select {
	case r := <-got:
		t.Fatalf("WaitNewer(3.0) returned %v, %v for 2.7", r.v, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	feed <- update(true, ver(3, 1), nodes(snode(1, "UP")))
	if r := <-got; r.err != nil || r.v.Version != (client.Version{Global: 3, Local: 1}) {
		t.Fatalf("WaitNewer(3.0) = %v, %v", r.v, r.err)
	}

	// ctx ends while waiting.
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		v, err := w.WaitNewer(ctx, client.Version{Global: 3, Local: 1})
		got <- result{v, err}
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case r := <-got:
		if !errors.Is(r.err, context.Canceled) || r.v != nil {
			t.Fatalf("cancelled WaitNewer = %v, %v", r.v, r.err)
		}
	case <-time.After(testutil.Timeout(2 * time.Second)):
		t.Fatal("WaitNewer ignored ctx cancellation")
	}
}

// (e) ReportBroken sends a report only for a term higher than any reported
// before for that pchannel; a report whose call failed can be repeated.
func TestWatcherReportBroken(t *testing.T) {
	fc := clienttest.Start(t, 1)
	st := clienttest.SampleChannelState()
	fc.SetChannelState(st) // dml_0 ASSIGNED at term 4, dml_1 at term 2
	n := fc.Nodes[0]
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	w := c.NewWatcher()
	ctx := context.Background()
	const p0, p1 = "by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"

	report := func(p string, term int64, wantMarked bool, wantCalls int) {
		t.Helper()
		marked, err := w.ReportBroken(ctx, p, term, errors.New("not the owner"))
		if err != nil || marked != wantMarked {
			t.Fatalf("ReportBroken(%s, %d) = %v, %v; want %v", p, term, marked, err, wantMarked)
		}
		if got := n.Calls("ReportAssignmentError"); got != wantCalls {
			t.Fatalf("after ReportBroken(%s, %d): %d calls, want %d", p, term, got, wantCalls)
		}
	}
	report(p0, 4, true, 1)
	report(p0, 4, false, 1) // same term: not sent
	report(p0, 3, false, 1) // lower term: not sent
	report(p0, 5, false, 2) // higher: sent (stale on the server: not marked)
	report(p0, 5, false, 2)
	report(p1, 2, true, 3) // another channel has its own record
	report(p1, 1, false, 3)

	reports := fc.Reports()
	if len(reports) != 3 {
		t.Fatalf("%d reports reached the server, want 3", len(reports))
	}
	for i, want := range []struct {
		p    string
		term int64
	}{{p0, 4}, {p0, 5}, {p1, 2}} {
		if r := reports[i]; r.Pchannel != want.p || r.Term != want.term || r.Error != "not the owner" {
			t.Fatalf("report %d = %v, want %s at term %d with the cause", i, r, want.p, want.term)
		}
	}

	// A failed call does not count as reported: the same term is sent again.
	var fail atomic.Bool
	fail.Store(true)
	n.SetHook(func(ctx context.Context, method string, call int) error {
		if method == "ReportAssignmentError" && fail.Load() {
			return status.Error(codes.Internal, "injected")
		}
		return nil
	})
	if _, err := w.ReportBroken(ctx, p1, 7, nil); status.Code(err) != codes.Internal {
		t.Fatalf("failing report: %v", err)
	}
	fail.Store(false)
	if _, err := w.ReportBroken(ctx, p1, 7, nil); err != nil {
		t.Fatal(err)
	}
	if got := n.Calls("ReportAssignmentError"); got != 5 {
		t.Fatalf("%d calls, want 5 (the failed report was not repeated)", got)
	}
	report(p1, 7, false, 5)
	// A failed report does not forget an earlier successful one.
	fail.Store(true)
	if _, err := w.ReportBroken(ctx, p0, 9, nil); err == nil {
		t.Fatal("failing report succeeded")
	}
	fail.Store(false)
	report(p0, 5, false, 6)
	if r := fc.Reports(); len(r) != 4 || r[3].Term != 7 || r[3].Error != "" {
		t.Fatalf("reports %v", r)
	}
}

// (f) Owner and Assigned.
func TestAssignmentViewHelpers(t *testing.T) {
	v := &client.AssignmentView{
		Nodes: map[uint64]*coordpb.StreamingNode{1: snode(1, "UP"), 2: snode(2, "DRAINING")},
		Channels: map[string]*coordpb.ChannelAssignment{
			"dml_3": chn("dml_3", 3, "ASSIGNED", 1),
			"dml_1": chn("dml_1", 5, "ASSIGNED", 1),
			"dml_2": chn("dml_2", 2, "ASSIGNED", 2),
			"dml_4": chn("dml_4", 7, "ASSIGNING", 1),
			"dml_5": chn("dml_5", 4, "UNAVAILABLE", 1),
			"dml_6": chn("dml_6", 1, "ASSIGNED", 9), // node 9 is not live
			"dml_7": chn("dml_7", 0, "UNINITIALIZED", 0),
		},
	}
	for _, tc := range []struct {
		ch   string
		node uint64
		term int64
		ok   bool
	}{
		{"dml_1", 1, 5, true},
		{"dml_2", 2, 2, true}, // DRAINING still owns it
		{"dml_4", 0, 0, false},
		{"dml_5", 0, 0, false},
		{"dml_6", 0, 0, false},
		{"dml_7", 0, 0, false},
		{"dml_missing", 0, 0, false},
	} {
		n, term, ok := v.Owner(tc.ch)
		if ok != tc.ok {
			t.Errorf("Owner(%s) ok = %v, want %v", tc.ch, ok, tc.ok)
			continue
		}
		if !ok {
			if n != nil {
				t.Errorf("Owner(%s) = node %v without ok", tc.ch, n)
			}
			continue
		}
		if n.Id != tc.node || term != tc.term {
			t.Errorf("Owner(%s) = node %d term %d, want %d %d", tc.ch, n.Id, term, tc.node, tc.term)
		}
	}
	for node, want := range map[uint64][]string{1: {"dml_1", "dml_3"}, 2: {"dml_2"}, 9: {"dml_6"}, 4: nil} {
		if got := v.Assigned(node); !slices.Equal(got, want) {
			t.Errorf("Assigned(%d) = %v, want %v", node, got, want)
		}
	}
}

// Run ends with ctx or when the client is closed.
func TestWatcherRunEnds(t *testing.T) {
	fc := clienttest.Start(t, 1)
	c, err := client.New(context.Background(), client.Config{Endpoints: fc.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	w := c.NewWatcher()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	testutil.Eventually(t, "the stream to open", func() bool { return fc.Nodes[0].OpenWatches() == 1 })
	c.Close()
	select {
	case err := <-done:
		if !errors.Is(err, client.ErrClosed) {
			t.Fatalf("Run after Close = %v, want ErrClosed", err)
		}
	case <-time.After(testutil.Timeout(3 * time.Second)):
		t.Fatal("Run did not end after Close")
	}
}
