package broadcaster

import (
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

const testNode2Addr = "10.0.0.2:22222"

// twoNodeHarness is a harness whose PChannels 0 and 1 are on the harness
// node and 2 and 3 on a second one, and 15 VChannels over them: with the
// CChannel, W5's 16 targets.
func twoNodeHarness(t *testing.T) (*harness, []string) {
	h := newHarness(t, nil)
	res := h.leader.MustPropose(t, &logpb.RegisterStreamingNode{Address: testNode2Addr, Incarnation: "inc-2"})
	for _, p := range h.pch[2:] {
		h.assignTo(p, res.GetRegisterNode().GetNodeId())
	}
	var targets []string
	for i := 0; i < 15; i++ {
		targets = append(targets, h.vch(i%4, int64(100+i)))
	}
	return h, targets
}

func w5Request(targets []string) Request {
	return Request{MessageType: "CreatePartition", Payload: []byte("p1"),
		ResourceKeys: []*logpb.ResourceKey{dbKey("db"), collKey("db", "c", false)}, VChannels: targets}
}

// TestBroadcastBatchesPerNode: a broadcast to 16 targets on 2 nodes makes
// one AppendBatch per node (2 calls, not 16), each carrying exactly the
// targets whose PChannel that node holds, and the task completes with
// every target acked in one FastAck. Old code: 16 single Appends.
func TestBroadcastBatchesPerNode(t *testing.T) {
	h, targets := twoNodeHarness(t)
	h.run(h.m, testTerm)
	res, err := broadcast(h.m, ctxTimeout(t, 5*time.Second), w5Request(targets))
	if err != nil {
		t.Fatalf("Broadcast: %v", err)
	}
	if bt := taskOf(t, h.leader, res.BroadcastID); bt.State != logpb.BroadcastState_BROADCAST_TOMBSTONE || len(bt.Acked) != 16 {
		t.Fatalf("task %v, want a tombstone with 16 acks", bt)
	}
	batches := h.app.Batches()
	if len(batches) != 2 {
		t.Fatalf("%d AppendBatch calls, want 2 (one per node): %+v", len(batches), batches)
	}
	st := h.leader.State()
	var all []string
	for _, b := range batches {
		for _, v := range b.VChannels {
			p, _ := st.PChannel(vocab.PChannelOf(v))
			if n, _ := st.StreamingNode(p.NodeId); n.Address != b.Node.Addr || n.Id != b.Node.ID || n.Epoch != b.Node.Epoch {
				t.Fatalf("%s (pchannel on node %d) batched for %+v", v, p.NodeId, b.Node)
			}
		}
		all = append(all, b.VChannels...)
	}
	want := append(append([]string(nil), targets...), h.cch)
	sort.Strings(all)
	sort.Strings(want)
	if len(all) != len(want) {
		t.Fatalf("batched %v, want %v", all, want)
	}
	for i := range all {
		if all[i] != want[i] {
			t.Fatalf("batched %v, want %v", all, want)
		}
	}
	if batches[0].Node.Addr == batches[1].Node.Addr {
		t.Fatalf("both batches went to %s", batches[0].Node.Addr)
	}
	if acks := appliedOf[*logpb.AckBroadcast](h.leader); len(acks) != 0 {
		t.Fatalf("acks %v, want none: the completion carries the checkpoints", acks)
	}
	if cs := appliedOf[*logpb.CompleteBroadcast](h.leader); len(cs) != 1 || len(cs[0].Checkpoints) != 16 {
		t.Fatalf("completions %v, want one carrying all 16 checkpoints", cs)
	}
}

// TestBatchItemFailureRetriesOnlyItsTarget: one target of a batch fails;
// the other 15 are acked from the same step, and the retry batches only
// the failed target.
func TestBatchItemFailureRetriesOnlyItsTarget(t *testing.T) {
	h, targets := twoNodeHarness(t)
	flaky := targets[2]
	failed := false
	h.app.setOnAppend(func(c appendCall) error {
		if c.VChannel == flaky && !failed {
			failed = true // appends run concurrently, but flaky is appended once per step
			return errors.New("flaky node")
		}
		return nil
	})
	h.run(h.m, testTerm)
	ch := broadcastAsync(ctxTimeout(t, 10*time.Second), h.m, w5Request(targets))
	if r := h.wait(ch); r.err != nil {
		t.Fatalf("Broadcast: %v", r.err)
	}
	// The partial step records its 15 acks alone; the retry's one
	// checkpoint completes the task.
	acks := appliedOf[*logpb.AckBroadcast](h.leader)
	if len(acks) != 1 || len(acks[0].Checkpoints) != 15 {
		t.Fatalf("acks %v, want one of 15", acks)
	}
	cs := appliedOf[*logpb.CompleteBroadcast](h.leader)
	if len(cs) != 1 || len(cs[0].Checkpoints) != 1 || cs[0].Checkpoints[0].Vchannel != flaky {
		t.Fatalf("completions %v, want one carrying %s", cs, flaky)
	}
	batches := h.app.Batches()
	if len(batches) != 3 || len(batches[2].VChannels) != 1 || batches[2].VChannels[0] != flaky {
		t.Fatalf("batches %+v, want 2 and then one of %s alone", batches, flaky)
	}
}

// unbatchedAppender hides fakeAppender's AppendBatch: an Appender without
// batches.
type unbatchedAppender struct{ Appender }

// TestAppenderWithoutBatchesAppendsPerTarget: an Appender that is not a
// BatchAppender still gets one Append per target.
func TestAppenderWithoutBatchesAppendsPerTarget(t *testing.T) {
	h, targets := twoNodeHarness(t)
	m, err := New(h.leader, unbatchedAppender{h.app}, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	h.run(m, testTerm)
	if _, err := broadcast(m, ctxTimeout(t, 5*time.Second), w5Request(targets)); err != nil {
		t.Fatalf("Broadcast: %v", err)
	}
	if b, c := len(h.app.Batches()), len(h.app.Calls()); b != 0 || c != 16 {
		t.Fatalf("%d batches and %d appends, want 16 single appends", b, c)
	}
}
