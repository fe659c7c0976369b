package workload

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/streamingnode/wal"
)

// channelFixture writes a real WAL (pchannel ch_1: two records at term 1
// by node 1, one at term 2 by node 2) and the matching history.
func channelFixture(t *testing.T) (*Channels, []history.Op) {
	t.Helper()
	dir := t.TempDir()
	c := &Channels{NClients: 2, walDir: dir, sent: map[string][]attempt{}}
	var ops []history.Op
	write := func(term int64, node uint64, payloads ...string) {
		w, err := wal.Open(dir, "ch_1", term)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range payloads {
			res, err := w.Append("ch_1_100v0", []byte(p), 0, uint64(len(ops)+1))
			if err != nil {
				t.Fatal(err)
			}
			in, _ := json.Marshal(AppendIn{VChannel: "ch_1_100v0", Payload: p})
			out, _ := json.Marshal(AppendOut{Node: node, Term: res.ID.Term, Offset: res.ID.Offset})
			ops = append(ops, history.Op{Index: len(ops), F: "append", Input: in, Output: out, Type: history.Ok})
			c.sent[p] = append(c.sent[p], attempt{node, term})
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write(1, 1, "c0-0", "c0-1")
	write(2, 2, "c1-0")
	c.obs = []Observation{
		{Watcher: 0, PChannel: "ch_1", Term: 1, Node: 1},
		{Watcher: 0, PChannel: "ch_1", Term: 2, Node: 2},
		{Watcher: 1, PChannel: "ch_1", Term: 2, Node: 2},
	}
	return c, ops
}

func verdicts(rs []checker.Result) map[string]checker.Verdict {
	out := map[string]checker.Verdict{}
	for _, r := range rs {
		out[r.Checker] = r.Verdict
	}
	return out
}

func TestChannelCheckers(t *testing.T) {
	c, ops := channelFixture(t)
	for _, r := range c.Check(ops, "", nil) {
		if r.Verdict != checker.Valid {
			t.Errorf("valid history judged invalid: %v", r)
		}
	}
	cases := []struct {
		name, checker string
		mutate        func(c *Channels, ops []history.Op) []history.Op
	}{
		{"ack missing from the WAL", "wal-matches-history", func(c *Channels, ops []history.Op) []history.Op {
			in, _ := json.Marshal(AppendIn{VChannel: "ch_1_100v0", Payload: "c0-9"})
			out, _ := json.Marshal(AppendOut{Node: 2, Term: 2, Offset: 9})
			return append(ops, history.Op{F: "append", Input: in, Output: out, Type: history.Ok})
		}},
		{"ack at the wrong offset", "wal-matches-history", func(c *Channels, ops []history.Op) []history.Op {
			ops[1].Output, _ = json.Marshal(AppendOut{Node: 1, Term: 1, Offset: 7})
			return ops
		}},
		{"record no client sent", "wal-matches-history", func(c *Channels, ops []history.Op) []history.Op { return ops[1:] }},
		{"record of a failed append", "wal-matches-history", func(c *Channels, ops []history.Op) []history.Op {
			ops[2].Type, ops[2].Output = history.Fail, nil
			return ops
		}},
		{"two writers in one term", "one-writer-per-term", func(c *Channels, ops []history.Op) []history.Op {
			ops[1].Output, _ = json.Marshal(AppendOut{Node: 3, Term: 1, Offset: 1})
			return ops
		}},
		{"watcher term goes back", "watcher-terms", func(c *Channels, ops []history.Op) []history.Op {
			c.obs = append(c.obs, Observation{Watcher: 1, PChannel: "ch_1", Term: 1, Node: 1})
			return ops
		}},
		{"one term, two nodes", "watcher-terms", func(c *Channels, ops []history.Op) []history.Op {
			c.obs = append(c.obs, Observation{Watcher: 1, PChannel: "ch_1", Term: 3, Node: 1}, Observation{Watcher: 0, PChannel: "ch_1", Term: 3, Node: 2})
			return ops
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ops := channelFixture(t)
			v := verdicts(c.Check(tc.mutate(c, ops), "", nil))
			if v[tc.checker] != checker.Invalid {
				t.Errorf("%s not caught by %s: %v", tc.name, tc.checker, v)
			}
		})
	}
}

func TestBroadcastCheckers(t *testing.T) {
	type rec struct {
		v  string
		id uint64
	}
	build := func(t *testing.T, recs []rec, acked map[uint64]BroadcastIn) (*Broadcast, []history.Op) {
		dir := t.TempDir()
		ws := map[string]*wal.Writer{}
		for i, r := range recs {
			p := wal.PChannelOf(r.v)
			if ws[p] == nil {
				w, err := wal.Open(dir, p, 1)
				if err != nil {
					t.Fatal(err)
				}
				ws[p] = w
			}
			// Each broadcast carries its call's payload, as coordd's do
			// (broadcast-at-most-once ties records to calls by it).
			if _, err := ws[p].Append(r.v, []byte(fmt.Sprintf("b%d", r.id)), r.id, uint64(i+1)); err != nil {
				t.Fatal(err)
			}
		}
		for _, w := range ws {
			w.Close()
		}
		var ops []history.Op
		for id, in := range acked {
			in.Payload = fmt.Sprintf("b%d", id)
			bi, _ := json.Marshal(in)
			bo, _ := json.Marshal(BroadcastOut{ID: id})
			ops = append(ops, history.Op{F: "broadcast", Input: bi, Output: bo, Type: history.Ok})
		}
		return &Broadcast{walDir: dir}, ops
	}
	two := []string{"a_200v0", "b_200v0"}
	acked := map[uint64]BroadcastIn{1: {VChannels: two, Key: "k"}, 2: {VChannels: two, Key: "k"}}
	good := []rec{{"a_200v0", 1}, {"b_200v0", 1}, {"a_200v0", 2}, {"b_200v0", 2}}
	b, ops := build(t, good, acked)
	for _, r := range b.Check(ops, "", nil) {
		if r.Verdict != checker.Valid {
			t.Errorf("valid history judged invalid: %v", r)
		}
	}
	for _, tc := range []struct {
		name, checker string
		recs          []rec
		acked         map[uint64]BroadcastIn
	}{
		{"missing from one target", "broadcast-exactly-once", good[:3], acked},
		// (A broadcast twice in one VChannel cannot be built here: the WAL
		// writer itself drops a repeated (broadcast ID, vchannel).)
		{"conflicting order", "broadcast-conflict-order", []rec{{"a_200v0", 1}, {"b_200v0", 2}, {"a_200v0", 2}, {"b_200v0", 1}}, acked},
		// Same relative order in both VChannels, but not the order the
		// tasks were created in (their IDs): the later task overtook.
		{"later task first everywhere", "broadcast-conflict-order", []rec{{"a_200v0", 2}, {"b_200v0", 2}, {"a_200v0", 1}, {"b_200v0", 1}}, acked},
		{"one key two ids", "broadcast-idempotency", good, map[uint64]BroadcastIn{1: {VChannels: two, Key: "k", Idem: "i", IdemScope: 5},
			2: {VChannels: two, Key: "k", Idem: "i", IdemScope: 5}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ops := build(t, tc.recs, tc.acked)
			if v := verdicts(b.Check(ops, "", nil)); v[tc.checker] != checker.Invalid {
				t.Errorf("not caught by %s: %v", tc.checker, v)
			}
		})
	}
}

// TestFenceBreachIsCaught: a deposed writer whose WAL fence is broken
// (wal.Writer.UnsafeSkipFence, as streamingnode --test-only-unsafe-no-fence
// does) appends at its old term after the new owner wrote; the checkers
// report it as a term regression.
func TestFenceBreachIsCaught(t *testing.T) {
	dir := t.TempDir()
	c := &Channels{NClients: 2, walDir: dir, sent: map[string][]attempt{}}
	var ops []history.Op
	write := func(w *wal.Writer, node uint64, p string) {
		t.Helper()
		res, err := w.Append("ch_1_100v0", []byte(p), 0, uint64(len(ops)+1))
		if err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(AppendIn{VChannel: "ch_1_100v0", Payload: p})
		out, _ := json.Marshal(AppendOut{Node: node, Term: res.ID.Term, Offset: res.ID.Offset})
		ops = append(ops, history.Op{Index: len(ops), F: "append", Input: in, Output: out, Type: history.Ok})
		c.sent[p] = append(c.sent[p], attempt{node, w.Term()})
	}
	old, err := wal.Open(dir, "ch_1", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.UnsafeSkipFence()
	write(old, 1, "c0-0")
	nw, err := wal.Open(dir, "ch_1", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	write(nw, 2, "c1-0")
	write(old, 1, "z2-0") // past the fence
	v := verdicts(c.Check(ops, "", nil))
	if v["wal-terms-monotonic"] != checker.Invalid {
		t.Fatalf("a write past the fence was not caught by wal-terms-monotonic: %v", v)
	}
}
