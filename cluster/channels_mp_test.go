package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/testutil"
)

// channelArgs make channel management fast enough to test: short TTL,
// rounds every second, rebalancing without a minimum interval.
var channelArgs = []string{"--pchannels", "8", "--node-ttl", "2s", "--balance-interval", "1s", "--min-rebalance-interval", "0s"}

func startChannelCluster(t *testing.T, streamingNodes int) (*cluster.Launcher, *client.Client) {
	t.Helper()
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: channelArgs, StreamingNodes: streamingNodes})
	c, err := client.New(context.Background(), secured(l, client.Config{Endpoints: strings.Split(l.Endpoints(), ","), RequestTimeout: 10 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return l, c
}

// placement is the FSM's view: pchannel → (node, term, state).
type placement struct {
	node  uint64
	term  int64
	state string
}

func placements(t *testing.T, c *client.Client) map[string]placement {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		t.Fatalf("list pchannels: %v", err)
	}
	out := map[string]placement{}
	for _, p := range resp.Pchannels {
		out[p.Name] = placement{p.NodeId, p.Term, p.State}
	}
	return out
}

// waitPlacement polls until ok(placements) or the timeout.
func waitPlacement(t *testing.T, c *client.Client, timeout time.Duration, what string, ok func(map[string]placement) bool) map[string]placement {
	t.Helper()
	var last map[string]placement
	testutil.EventuallyEvery(t, timeout, 50*time.Millisecond, what, func() bool {
		last = placements(t, c)
		return ok(last)
	})
	return last
}

func allAssigned(ps map[string]placement, avoid uint64) bool {
	if len(ps) == 0 {
		return false
	}
	for _, p := range ps {
		if p.state != "ASSIGNED" || p.node == avoid {
			return false
		}
	}
	return true
}

func liveNodeID(t *testing.T, c *client.Client, addr string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nodes, err := c.ListNodes(ctx, coordpb.ReadConsistency_LINEARIZABLE, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Address == addr {
			return n.Id
		}
	}
	return 0
}

func snStatus(ctx context.Context, addr string) (*coordpb.NodeStatusResponse, error) {
	return snStatusWith(ctx, addr, snDialOptions())
}

// snStatusWith is snStatus with explicit dial options (plaintext for a
// `coordd dev` cluster).
func snStatusWith(ctx context.Context, addr string, opts []grpc.DialOption) (*coordpb.NodeStatusResponse, error) {
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return coordpb.NewStreamingNodeServiceClient(conn).Status(ctx, &coordpb.NodeStatusRequest{})
}

// heldWALs asks every running streaming node which WALs it holds.
func heldWALs(t *testing.T, l *cluster.Launcher) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, sn := range l.StreamingNodes() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := snStatus(ctx, sn.Addr)
		cancel()
		if err != nil {
			continue // not running
		}
		for _, w := range st.Wals {
			out[w.Pchannel] = append(out[w.Pchannel], fmt.Sprintf("%s@%d", sn.Name, w.Term))
		}
	}
	return out
}

// TestStreamingNodeKillAndRejoin: SIGKILL a streaming node; every PChannel
// ends up ASSIGNED to the survivor with a higher term. The killed node is
// restarted; once it rejoins and channels are balanced again, no PChannel
// is held by two nodes, and every holder matches the FSM's term.
func TestStreamingNodeKillAndRejoin(t *testing.T) {
	l, c := startChannelCluster(t, 2)
	before := waitPlacement(t, c, 30*time.Second, "all channels assigned over two nodes", func(ps map[string]placement) bool {
		nodes := map[uint64]bool{}
		for _, p := range ps {
			nodes[p.node] = true
		}
		return allAssigned(ps, 0) && len(nodes) == 2
	})
	victim := l.StreamingNodes()[0]
	victimID := liveNodeID(t, c, victim.Addr)
	if victimID == 0 {
		t.Fatal("victim not registered")
	}
	if err := l.KillStreamingNode(0); err != nil {
		t.Fatal(err)
	}
	after := waitPlacement(t, c, 20*time.Second, "the survivor to hold every channel", func(ps map[string]placement) bool {
		return allAssigned(ps, victimID)
	})
	for name, p := range after {
		if b := before[name]; b.node == victimID && p.term <= b.term {
			t.Errorf("%s moved off the killed node without a higher term: %d -> %d", name, b.term, p.term)
		}
	}

	if err := l.StartStreamingNode(0); err != nil {
		t.Fatal(err)
	}
	final := waitPlacement(t, c, 40*time.Second, "the restarted node to get channels back", func(ps map[string]placement) bool {
		nodes := map[uint64]bool{}
		for _, p := range ps {
			nodes[p.node] = true
		}
		return allAssigned(ps, victimID) && len(nodes) == 2
	})
	// Held WALs agree with the FSM: exactly one holder per channel, at the
	// FSM's term.
	bad := "" // logged when it changes, so a failure shows the disagreement
	testutil.EventuallyEvery(t, 10*time.Second, 100*time.Millisecond, "WAL holders to agree with the FSM", func() bool {
		held := heldWALs(t, l)
		prev := bad
		bad = ""
		for name, p := range final {
			hs := held[name]
			if len(hs) != 1 || !strings.HasSuffix(hs[0], fmt.Sprintf("@%d", p.term)) {
				bad = fmt.Sprintf("%s: FSM term %d on node %d, holders %v", name, p.term, p.node, hs)
				break
			}
		}
		if bad != "" && bad != prev {
			t.Logf("WAL holders disagree with the FSM: %s", bad)
		}
		if bad != "" {
			final = placements(t, c)
		}
		return bad == ""
	})
}

// TestLeaderKillMidRebalance: drain a streaming node so channels start
// moving, SIGKILL the coordd leader at once; the new leader finishes (or
// retries) every move: all channels ASSIGNED, none on the drained node.
func TestLeaderKillMidRebalance(t *testing.T) {
	l, c := startChannelCluster(t, 2)
	cs := dialAll(t, l)
	waitPlacement(t, c, 30*time.Second, "all channels assigned over two nodes", func(ps map[string]placement) bool {
		nodes := map[uint64]bool{}
		for _, p := range ps {
			nodes[p.node] = true
		}
		return allAssigned(ps, 0) && len(nodes) == 2
	})
	drained := liveNodeID(t, c, l.StreamingNodes()[1].Addr)
	leader := leaderIndex(t, l, cs, -1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.DrainNode(ctx, drained, true, "test"); err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(leader); err != nil {
		t.Fatal(err)
	}
	ps := waitPlacement(t, c, 30*time.Second, "every channel moved off the drained node", func(ps map[string]placement) bool {
		return allAssigned(ps, drained)
	})
	for name, p := range ps {
		if p.state == "ASSIGNING" {
			t.Errorf("%s still ASSIGNING", name)
		}
	}
	if err := l.StartMember(leader); err != nil {
		t.Fatal(err)
	}
}

// TestFencedOldOwnerCannotAppend: a streaming node paused past its TTL
// loses its channels to the other node (which opens them at a higher
// term). Resumed, it still believes it owns them for a moment; an append
// through it at its old term is refused and never becomes readable.
func TestFencedOldOwnerCannotAppend(t *testing.T) {
	l, c := startChannelCluster(t, 2)
	waitPlacement(t, c, 30*time.Second, "all channels assigned over two nodes", func(ps map[string]placement) bool {
		nodes := map[uint64]bool{}
		for _, p := range ps {
			nodes[p.node] = true
		}
		return allAssigned(ps, 0) && len(nodes) == 2
	})
	victim := l.StreamingNodes()[0]
	victimID := liveNodeID(t, c, victim.Addr)
	ps := placements(t, c)
	var pchannel string
	var oldTerm int64
	names := make([]string, 0, len(ps))
	for n := range ps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if ps[n].node == victimID {
			pchannel, oldTerm = n, ps[n].term
			break
		}
	}
	vchannel := pchannel + "_77v0"
	conn, err := grpc.NewClient(victim.Addr, snDialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sn := coordpb.NewStreamingNodeServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vst, err := snStatus(ctx, victim.Addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Append(ctx, &coordpb.AppendRequest{Vchannel: vchannel, Term: oldTerm, Payload: []byte("before"),
		NodeId: vst.NodeId, Epoch: vst.Epoch}); err != nil {
		t.Fatalf("append while owner: %v", err)
	}

	// The reference WAL serialises a PChannel's fence with flock(2) on a
	// shared directory, and its readers (the flusher) hold the lock shared
	// for the moment of a read: a process stopped inside a read would block
	// the new owner's open until it is continued. That is the reference
	// WAL's limit, not what this test is about, so the victim is stopped
	// while the test itself holds each of its PChannels' locks (it cannot
	// then be inside a read or an append), and the locks are let go after.
	var held []*os.File
	for _, n := range names {
		if ps[n].node != victimID {
			continue
		}
		f, err := os.OpenFile(filepath.Join(l.WALDir(), n, "lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("open %s's WAL lock: %v", n, err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatalf("lock %s's WAL: %v", n, err)
		}
		held = append(held, f)
	}
	err = l.SignalStreamingNode(0, syscall.SIGSTOP)
	for _, f := range held {
		f.Close() // closing the descriptor releases its flock
	}
	if err != nil {
		t.Fatal(err)
	}
	moved := waitPlacement(t, c, 20*time.Second, "channels to leave the paused node", func(ps map[string]placement) bool {
		return allAssigned(ps, victimID)
	})
	if moved[pchannel].term <= oldTerm {
		t.Fatalf("%s moved without a higher term", pchannel)
	}
	fence, err := wal.ReadFence(l.WALDir(), pchannel)
	if err != nil || fence < moved[pchannel].term {
		t.Fatalf("fence of %s is %d (%v), want >= %d", pchannel, fence, err, moved[pchannel].term)
	}
	if err := l.SignalStreamingNode(0, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	_, err = sn.Append(ctx, &coordpb.AppendRequest{Vchannel: vchannel, Term: oldTerm, Payload: []byte("after-fence"),
		NodeId: vst.NodeId, Epoch: vst.Epoch})
	if err == nil {
		t.Fatal("the fenced old owner accepted an append")
	}
	t.Logf("old owner's append refused: %v", err)
	recs, err := wal.ReadAll(l.WALDir(), pchannel, vchannel, 0)
	if err != nil {
		t.Fatal(err)
	}
	var payloads []string
	for _, r := range recs {
		payloads = append(payloads, string(r.Payload))
	}
	if len(payloads) != 1 || payloads[0] != "before" {
		t.Fatalf("WAL of %s/%s holds %q, want only the pre-fence append", pchannel, vchannel, payloads)
	}
}
