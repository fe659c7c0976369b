package policy

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

const testNow = int64(1_000_000_000)

var (
	oldAssign    = testNow - (10 * time.Minute).Milliseconds() // past the 5m default
	recentAssign = testNow - time.Minute.Milliseconds()        // within the 5m default
)

// named returns n channels "ch-000".., each on node (0 = to be placed)
// assigned at last.
func named(n int, node uint64, last int64) []Channel {
	out := make([]Channel, n)
	for i := range out {
		out[i] = Channel{Name: fmt.Sprintf("ch-%03d", i), Node: node, LastAssignMs: last}
	}
	return out
}

// tb is the part of testing.TB and *rapid.T the helpers use.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustPolicy(t tb, c Config) Policy {
	t.Helper()
	p, err := NewVChannelFair(c)
	if err != nil {
		t.Fatalf("NewVChannelFair: %v", err)
	}
	return p
}

func mustBalance(t tb, c Config, l Layout) map[string]uint64 {
	t.Helper()
	got, err := mustPolicy(t, c).Balance(l)
	if err != nil {
		t.Fatalf("Balance: %v", err)
	}
	checkComplete(t, l, got)
	return got
}

// checkComplete fails unless every channel is assigned to one of the nodes.
func checkComplete(t tb, l Layout, got map[string]uint64) {
	t.Helper()
	if len(got) != len(l.Channels) {
		t.Fatalf("assignment has %d channels, layout %d", len(got), len(l.Channels))
	}
	for _, c := range l.Channels {
		n, ok := got[c.Name]
		if !ok {
			t.Fatalf("channel %q not assigned", c.Name)
		}
		if !slices.Contains(l.Nodes, n) {
			t.Fatalf("channel %q assigned to %d, not in nodes %v", c.Name, n, l.Nodes)
		}
	}
}

// perNode counts channels per node.
func perNode(got map[string]uint64) map[uint64]int {
	out := map[uint64]int{}
	for _, n := range got {
		out[n]++
	}
	return out
}

// moved counts channels that were on a healthy node and changed node.
func moved(l Layout, got map[string]uint64) int {
	n := 0
	for _, c := range l.Channels {
		if slices.Contains(l.Nodes, c.Node) && got[c.Name] != c.Node {
			n++
		}
	}
	return n
}

func noRebalance() Config {
	c := DefaultConfig()
	c.AllowRebalance = false
	return c
}

func TestBalanceNoNodes(t *testing.T) {
	for _, l := range []Layout{
		{},
		{Channels: named(3, 0, 0)},
		{Channels: named(3, 7, oldAssign), Nodes: []uint64{}},
	} {
		got, err := mustPolicy(t, DefaultConfig()).Balance(l)
		if !errors.Is(err, ErrNoNodes) {
			t.Fatalf("Balance(%v) = %v, %v; want ErrNoNodes", l, got, err)
		}
	}
}

func TestBalanceInvalidLayout(t *testing.T) {
	dup := named(3, 0, 0)
	dup[2].Name = dup[0].Name
	empty := named(3, 0, 0)
	empty[1].Name = ""
	tests := []struct {
		name string
		l    Layout
	}{
		{"duplicate channel", Layout{Channels: dup, Nodes: []uint64{1}}},
		{"empty name", Layout{Channels: empty, Nodes: []uint64{1}}},
		{"node zero", Layout{Channels: named(3, 0, 0), Nodes: []uint64{0, 1}}},
		{"too many channels", Layout{Channels: make([]Channel, MaxChannels+1), Nodes: []uint64{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mustPolicy(t, DefaultConfig()).Balance(tt.l)
			if !errors.Is(err, ErrInvalidLayout) {
				t.Fatalf("Balance = %v, %v; want ErrInvalidLayout", got, err)
			}
		})
	}
}

func TestBalanceEmptyChannels(t *testing.T) {
	got := mustBalance(t, DefaultConfig(), Layout{Nodes: []uint64{1, 2}, NowMs: testNow})
	if len(got) != 0 {
		t.Fatalf("got %v, want empty", got)
	}
}

func TestBalanceSingleNode(t *testing.T) {
	chs := named(7, 0, 0)
	chs[1].Node, chs[1].LastAssignMs = 5, oldAssign // node 5 is not healthy
	chs[2].Node, chs[2].LastAssignMs = 9, oldAssign
	chs[3].Collections = []int64{1, 1, 2}
	for _, cfg := range []Config{DefaultConfig(), noRebalance()} {
		got := mustBalance(t, cfg, Layout{Channels: chs, Nodes: []uint64{9}, NowMs: testNow})
		want := map[string]uint64{}
		for _, c := range chs {
			want[c.Name] = 9
		}
		if !maps.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestBalanceFromScratch(t *testing.T) {
	tests := []struct {
		name     string
		channels int
		nodes    []uint64
		want     map[uint64]int
	}{
		{"256 over 8", 256, []uint64{1, 2, 3, 4, 5, 6, 7, 8},
			map[uint64]int{1: 32, 2: 32, 3: 32, 4: 32, 5: 32, 6: 32, 7: 32, 8: 32}},
		{"10 over 3, smaller IDs get the extra", 10, []uint64{30, 10, 20},
			map[uint64]int{10: 4, 20: 3, 30: 3}},
		{"11 over 3", 11, []uint64{30, 10, 20},
			map[uint64]int{10: 4, 20: 4, 30: 3}},
		{"3 over 5", 3, []uint64{50, 40, 30, 20, 10},
			map[uint64]int{10: 1, 20: 1, 30: 1}},
		{"duplicate node IDs are one node", 4, []uint64{2, 1, 2, 1},
			map[uint64]int{1: 2, 2: 2}},
	}
	for _, tt := range tests {
		for _, cfg := range []Config{DefaultConfig(), noRebalance()} {
			t.Run(fmt.Sprintf("%s/rebalance=%v", tt.name, cfg.AllowRebalance), func(t *testing.T) {
				got := mustBalance(t, cfg, Layout{Channels: named(tt.channels, 0, 0), Nodes: tt.nodes, NowMs: testNow})
				if c := perNode(got); !maps.Equal(c, tt.want) {
					t.Fatalf("per node = %v, want %v", c, tt.want)
				}
			})
		}
	}
}

// Placement order is name order (no vchannels) and ties go to the smaller
// node ID, so 10 channels over 3 nodes go round-robin.
func TestBalancePlacementOrder(t *testing.T) {
	got := mustBalance(t, DefaultConfig(), Layout{Channels: named(10, 0, 0), Nodes: []uint64{30, 10, 20}, NowMs: testNow})
	want := map[string]uint64{}
	for i, n := range []uint64{10, 20, 30, 10, 20, 30, 10, 20, 30, 10} {
		want[fmt.Sprintf("ch-%03d", i)] = n
	}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// More vchannels are placed first: the heaviest channel lands on the
	// smallest node even though its name sorts last, the next one on the
	// other node; then ch-000 ties (node 1 is 0.5 vchannels above average,
	// node 2 0.5 below) and goes to the smaller node.
	chs := named(4, 0, 0)
	chs[3].Collections = []int64{1, 2, 3}
	chs[2].Collections = []int64{4, 5}
	got = mustBalance(t, noRebalance(), Layout{Channels: chs, Nodes: []uint64{2, 1}, NowMs: testNow})
	want = map[string]uint64{"ch-003": 1, "ch-002": 2, "ch-000": 1, "ch-001": 2}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// randomLayout builds a messy layout: random vchannels, some channels on
// healthy nodes (old or recent), some on dead nodes, some unassigned.
func randomLayout(r *rand.Rand, channels int, nodes []uint64, collections int) Layout {
	chs := make([]Channel, channels)
	for i := range chs {
		c := Channel{Name: fmt.Sprintf("dml_%d", i)}
		for range r.IntN(6) {
			c.Collections = append(c.Collections, int64(1+r.IntN(collections)))
		}
		switch r.IntN(4) {
		case 0: // to be placed
		case 1:
			c.Node, c.LastAssignMs = 1000+uint64(r.IntN(3)), oldAssign // dead node
		case 2:
			c.Node, c.LastAssignMs = nodes[r.IntN(len(nodes))], recentAssign
		default:
			c.Node, c.LastAssignMs = nodes[r.IntN(len(nodes)/2+1)], oldAssign // skewed
		}
		chs[i] = c
	}
	return Layout{Channels: chs, Nodes: nodes, NowMs: testNow}
}

func shuffled(r *rand.Rand, l Layout) Layout {
	out := Layout{Channels: slices.Clone(l.Channels), Nodes: slices.Clone(l.Nodes), NowMs: l.NowMs}
	r.Shuffle(len(out.Channels), func(i, j int) { out.Channels[i], out.Channels[j] = out.Channels[j], out.Channels[i] })
	r.Shuffle(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	for i := range out.Channels {
		cols := slices.Clone(out.Channels[i].Collections)
		r.Shuffle(len(cols), func(a, b int) { cols[a], cols[b] = cols[b], cols[a] })
		out.Channels[i].Collections = cols
	}
	return out
}

func TestBalanceDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20 {
		nodes := []uint64{11, 3, 7, 5, 2, 13}[:2+i%5]
		l := randomLayout(r, 10+r.IntN(60), nodes, 8)
		for _, cfg := range []Config{DefaultConfig(), noRebalance()} {
			first := mustBalance(t, cfg, l)
			if again := mustBalance(t, cfg, l); !maps.Equal(first, again) {
				t.Fatalf("layout %d: second run differs:\n%v\n%v", i, first, again)
			}
			for range 3 {
				if got := mustBalance(t, cfg, shuffled(r, l)); !maps.Equal(first, got) {
					t.Fatalf("layout %d: shuffled input differs:\n%v\n%v", i, first, got)
				}
			}
		}
	}
}

func TestBalanceKeepsHealthyAssignments(t *testing.T) {
	// 3 nodes × 2 channels, balanced and old enough to move: all stay; the
	// channel on dead node 99 goes to the smallest node.
	chs := named(7, 0, oldAssign)
	for i, n := range []uint64{1, 1, 2, 2, 3, 3, 99} {
		chs[i].Node = n
	}
	got := mustBalance(t, DefaultConfig(), Layout{Channels: chs, Nodes: []uint64{1, 2, 3}, NowMs: testNow})
	want := map[string]uint64{"ch-000": 1, "ch-001": 1, "ch-002": 2, "ch-003": 2, "ch-004": 3, "ch-005": 3, "ch-006": 1}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// Node 3 fails: its channels spread over 1 and 2, the others stay.
	chs = named(9, 0, oldAssign)
	for i := range chs {
		chs[i].Node = uint64(1 + i/3)
	}
	l := Layout{Channels: chs, Nodes: []uint64{1, 2}, NowMs: testNow}
	got = mustBalance(t, DefaultConfig(), l)
	if m := moved(l, got); m != 0 {
		t.Fatalf("moved %d healthy channels, want 0: %v", m, got)
	}
	if c := perNode(got); !maps.Equal(c, map[uint64]int{1: 5, 2: 4}) {
		t.Fatalf("per node = %v, want 1:5 2:4", c)
	}
}

// Without rebalance nothing on a healthy node moves, however
// unbalanced.
func TestBalanceAllowRebalanceFalse(t *testing.T) {
	chs := named(12, 1, oldAssign)
	chs = append(chs, Channel{Name: "new-a"}, Channel{Name: "new-b"}, Channel{Name: "new-c", Node: 42, LastAssignMs: oldAssign})
	l := Layout{Channels: chs, Nodes: []uint64{1, 2, 3}, NowMs: testNow}

	got := mustBalance(t, noRebalance(), l)
	if m := moved(l, got); m != 0 {
		t.Fatalf("AllowRebalance=false moved %d channels: %v", m, got)
	}
	if want := map[string]uint64{"new-a": 2, "new-b": 3, "new-c": 2}; got["new-a"] != want["new-a"] || got["new-b"] != want["new-b"] || got["new-c"] != want["new-c"] {
		t.Fatalf("placed channels = a:%d b:%d c:%d, want %v", got["new-a"], got["new-b"], got["new-c"], want)
	}

	// The same layout does rebalance when allowed.
	if m := moved(l, mustBalance(t, DefaultConfig(), l)); m == 0 {
		t.Fatalf("AllowRebalance=true moved nothing on a 12/1/2 layout")
	}
}

// A channel assigned within MinRebalanceInterval is not moved, and a round
// moves at most MaxStep channels.
func TestBalanceMinRebalanceInterval(t *testing.T) {
	withStep := func(step int) Config {
		c := DefaultConfig()
		c.RebalanceMaxStep = step
		return c
	}
	mixed := named(12, 1, recentAssign)
	for i := 0; i < 12; i += 3 {
		mixed[i].LastAssignMs = oldAssign // ch-000, ch-003, ch-006, ch-009
	}
	exact := named(12, 1, testNow-(5*time.Minute).Milliseconds())
	// 4/4/4, all recent: the interval holds.
	recentBalanced := named(12, 1, recentAssign)
	for i := range recentBalanced {
		recentBalanced[i].Node = uint64(1 + i%3)
	}
	// 6/4/4 (14 channels, floor 4): no node is below its floor share, so
	// only node 1's one old channel may move.
	mixedFloor := named(14, 1, recentAssign)
	for i := 6; i < 14; i++ {
		mixedFloor[i].Node = uint64(2 + (i-6)%2)
	}
	mixedFloor[0].LastAssignMs = oldAssign
	tests := []struct {
		name      string
		chs       []Channel
		cfg       Config
		wantMoved int
		wantCount map[uint64]int
	}{
		{"all recent, balanced: nothing moves", recentBalanced, DefaultConfig(), 0, map[uint64]int{1: 4, 2: 4, 3: 4}},
		{"all recent on one node: empty nodes are filled", named(12, 1, recentAssign), DefaultConfig(), 3, map[uint64]int{1: 9, 2: 2, 3: 1}},
		{"all recent, AllowRebalance false: nothing fills", named(12, 1, recentAssign), noRebalance(), 0, map[uint64]int{1: 12}},
		{"all old: MaxStep moves", named(12, 1, oldAssign), DefaultConfig(), 3, map[uint64]int{1: 9, 2: 2, 3: 1}},
		{"never assigned time counts as old", named(12, 1, 0), DefaultConfig(), 3, map[uint64]int{1: 9, 2: 2, 3: 1}},
		{"exactly the interval is old", exact, DefaultConfig(), 3, map[uint64]int{1: 9, 2: 2, 3: 1}},
		{"MaxStep 1", named(12, 1, oldAssign), withStep(1), 1, map[uint64]int{1: 11, 2: 1}},
		{"MaxStep 0", named(12, 1, oldAssign), withStep(0), 0, map[uint64]int{1: 12}},
		{"MaxStep 8", named(12, 1, oldAssign), withStep(8), 8, map[uint64]int{1: 4, 2: 4, 3: 4}},
		{"interval 0 makes recent movable", named(12, 1, recentAssign), func() Config { c := DefaultConfig(); c.MinRebalanceInterval = 0; return c }(), 3, map[uint64]int{1: 9, 2: 2, 3: 1}},
		{"fill ignores age", mixed, withStep(8), 8, map[uint64]int{1: 4, 2: 4, 3: 4}},
		{"only old ones move once every node has its floor share", mixedFloor, withStep(8), 1, map[uint64]int{1: 5, 2: 5, 3: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Layout{Channels: tt.chs, Nodes: []uint64{1, 2, 3}, NowMs: testNow}
			got := mustBalance(t, tt.cfg, l)
			if m := moved(l, got); m != tt.wantMoved {
				t.Fatalf("moved %d, want %d: %v", m, tt.wantMoved, got)
			}
			if c := perNode(got); !maps.Equal(c, tt.wantCount) {
				t.Fatalf("per node = %v, want %v", c, tt.wantCount)
			}
			for _, c := range tt.chs {
				if tt.name != "fill ignores age" && !strings.Contains(tt.name, "filled") && c.LastAssignMs > testNow-tt.cfg.MinRebalanceInterval.Milliseconds() && got[c.Name] != c.Node {
					t.Fatalf("recently assigned %s moved %d → %d", c.Name, c.Node, got[c.Name])
				}
			}
		})
	}
}

// Repeated rounds converge, each moving at most MaxStep channels.
func TestBalanceRepeatedRoundsConverge(t *testing.T) {
	l := Layout{Channels: named(24, 1, oldAssign), Nodes: []uint64{1, 2, 3, 4}, NowMs: testNow}
	for round := 0; ; round++ {
		if round > 20 {
			t.Fatalf("no convergence after 20 rounds: %v", perNode(mustBalance(t, DefaultConfig(), l)))
		}
		got := mustBalance(t, DefaultConfig(), l)
		m := moved(l, got)
		if m > 3 {
			t.Fatalf("round %d moved %d > MaxStep", round, m)
		}
		if m == 0 {
			if c := perNode(got); !maps.Equal(c, map[uint64]int{1: 6, 2: 6, 3: 6, 4: 6}) {
				t.Fatalf("converged to %v, want 6 each", c)
			}
			return
		}
		for i := range l.Channels {
			l.Channels[i].Node = got[l.Channels[i].Name]
		}
	}
}

func vsum(l Layout, got map[string]uint64) map[uint64]int {
	out := map[uint64]int{}
	for _, c := range l.Channels {
		out[got[c.Name]] += len(c.Collections)
	}
	return out
}

func TestBalanceVChannelWeighting(t *testing.T) {
	heavy := func(name string, base int64) Channel {
		c := Channel{Name: name}
		for i := range int64(10) {
			c.Collections = append(c.Collections, base+i) // distinct collections: no affinity effect
		}
		return c
	}
	// From scratch: the four heavy channels are placed first and split 2/2.
	var chs []Channel
	for i := range 4 {
		chs = append(chs, heavy(fmt.Sprintf("h%d", i), int64(100*i)), Channel{Name: fmt.Sprintf("l%d", i)})
	}
	l := Layout{Channels: chs, Nodes: []uint64{1, 2}, NowMs: testNow}
	got := mustBalance(t, DefaultConfig(), l)
	if v := vsum(l, got); !maps.Equal(v, map[uint64]int{1: 20, 2: 20}) {
		t.Fatalf("vchannels per node = %v, want 20/20 (%v)", v, got)
	}

	// Balanced by PChannel count but not by VChannel count: rebalance moves
	// heavy channels only because of the vchannel weight.
	for i := range chs {
		chs[i].LastAssignMs = oldAssign
		chs[i].Node = 2
		if chs[i].Name[0] == 'h' {
			chs[i].Node = 1
		}
	}
	// Round 1 (MaxStep 3) moves two heavy channels to node 2 and one light
	// one back: 20/20 vchannels, 3/5 pchannels.
	got = mustBalance(t, DefaultConfig(), l)
	if v := vsum(l, got); v[1] != 20 || v[2] != 20 {
		t.Fatalf("after rebalance vchannels per node = %v, want 20/20 (%v)", v, got)
	}
	if c := perNode(got); !maps.Equal(c, map[uint64]int{1: 3, 2: 5}) {
		t.Fatalf("after rebalance per node = %v, want 3/5", c)
	}
	// Round 2 evens the pchannel counts.
	l2 := Layout{Channels: slices.Clone(chs), Nodes: l.Nodes, NowMs: testNow}
	for i := range l2.Channels {
		l2.Channels[i].Node = got[l2.Channels[i].Name]
	}
	got = mustBalance(t, DefaultConfig(), l2)
	if v, c := vsum(l2, got), perNode(got); v[1] != 20 || v[2] != 20 || !maps.Equal(c, map[uint64]int{1: 4, 2: 4}) {
		t.Fatalf("after round 2 vchannels %v, pchannels %v; want 20/20, 4/4", v, c)
	}
	noV := DefaultConfig()
	noV.VChannelWeight = 0
	if m := moved(l, mustBalance(t, noV, l)); m != 0 {
		t.Fatalf("with VChannelWeight 0 moved %d channels, want 0", m)
	}
}

func TestBalanceAntiAffinity(t *testing.T) {
	// a and c carry a shard of collection 1, b and d of collection 2. By
	// counts alone c ties between the nodes and would join a on node 1.
	chs := []Channel{
		{Name: "a", Collections: []int64{1}},
		{Name: "b", Collections: []int64{2}},
		{Name: "c", Collections: []int64{1}},
		{Name: "d", Collections: []int64{2}},
	}
	l := Layout{Channels: chs, Nodes: []uint64{1, 2}, NowMs: testNow}
	tests := []struct {
		name string
		wA   float64
		want map[string]uint64
	}{
		{"anti-affinity splits collections", 0.01, map[string]uint64{"a": 1, "b": 2, "c": 2, "d": 1}},
		{"without it ties go to the smaller node", 0, map[string]uint64{"a": 1, "b": 2, "c": 1, "d": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := noRebalance()
			cfg.AntiAffinityWeight = tt.wA
			if got := mustBalance(t, cfg, l); !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}

	// Rebalance separates co-located shards when counts are already equal.
	colocated := []Channel{
		{Name: "a", Collections: []int64{1}, Node: 1, LastAssignMs: oldAssign},
		{Name: "c", Collections: []int64{1}, Node: 1, LastAssignMs: oldAssign},
		{Name: "b", Collections: []int64{2}, Node: 2, LastAssignMs: oldAssign},
		{Name: "d", Collections: []int64{2}, Node: 2, LastAssignMs: oldAssign},
	}
	l = Layout{Channels: colocated, Nodes: []uint64{1, 2}, NowMs: testNow}
	cfg := DefaultConfig()
	cfg.RebalanceTolerance = 0.001 // the gain is 2 pairs × wA × penalty 2 = 0.04
	got := mustBalance(t, cfg, l)
	if got["a"] == got["c"] || got["b"] == got["d"] {
		t.Fatalf("shards of one collection still co-located: %v", got)
	}
	if c := perNode(got); !maps.Equal(c, map[uint64]int{1: 2, 2: 2}) {
		t.Fatalf("per node = %v, want 2/2", c)
	}
	cfg.RebalanceTolerance = 0.05 // larger than the gain
	if m := moved(l, mustBalance(t, cfg, l)); m != 0 {
		t.Fatalf("tolerance 0.05 moved %d channels, want 0", m)
	}
}

func TestBalanceTolerance(t *testing.T) {
	// 101/99 over two nodes: moving one channel gains
	// 0.4·(0.01² + 0.01²) = 8e-5.
	chs := named(200, 1, oldAssign)
	for i := 101; i < 200; i++ {
		chs[i].Node = 2
	}
	l := Layout{Channels: chs, Nodes: []uint64{1, 2}, NowMs: testNow}
	tests := []struct {
		tol       float64
		wantMoved int
	}{
		{0.01, 0}, // default
		{9e-5, 0},
		{7e-5, 1},
		{0, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.tol), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.RebalanceTolerance = tt.tol
			got := mustBalance(t, cfg, l)
			if m := moved(l, got); m != tt.wantMoved {
				t.Fatalf("moved %d, want %d", m, tt.wantMoved)
			}
			if tt.wantMoved > 0 {
				if c := perNode(got); !maps.Equal(c, map[uint64]int{1: 100, 2: 100}) {
					t.Fatalf("per node = %v, want 100/100", c)
				}
			}
		})
	}
}

// A layout that is already optimal is returned unchanged even with zero
// tolerance: equal scores never count as an improvement.
func TestBalanceZeroToleranceNoChurn(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	cfg := DefaultConfig()
	cfg.RebalanceTolerance = 0
	cfg.MinRebalanceInterval = 0
	l := randomLayout(r, 64, []uint64{1, 2, 3, 4}, 10)
	for round := 0; round < 50; round++ {
		got := mustBalance(t, cfg, l)
		if moved(l, got) == 0 && round > 0 {
			if again := mustBalance(t, cfg, l); !maps.Equal(again, got) {
				t.Fatalf("fixed point not stable")
			}
			return
		}
		for i := range l.Channels {
			l.Channels[i].Node = got[l.Channels[i].Name]
		}
	}
	t.Fatalf("no fixed point after 50 rounds")
}

func TestPenalty(t *testing.T) {
	tests := []struct {
		a, b []int64
		want float64
	}{
		{nil, nil, 0},                     // both empty: affinity 1
		{[]int64{1}, nil, 0},              // one collection, no repeat
		{[]int64{1, 2}, []int64{3, 4}, 0}, // disjoint
		{[]int64{1}, []int64{1}, 2},       // distinct 1, repeated 2: affinity −1
		{[]int64{1, 2}, []int64{1, 3}, 2.0 / 3},
		{[]int64{1, 1}, nil, 2},                    // repeated inside one channel
		{[]int64{1, 1}, []int64{2}, 1},             // distinct 2, repeated 2
		{[]int64{1, 1}, []int64{1}, 3},             // distinct 1, repeated 3
		{[]int64{5, 6, 7}, []int64{7, 6}, 4.0 / 3}, // distinct 3, repeated 4
	}
	for _, tt := range tests {
		a, b := newProfile(Channel{Collections: tt.a}), newProfile(Channel{Collections: tt.b})
		if got := penalty(&a, &b); got != tt.want {
			t.Errorf("penalty(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := penalty(&b, &a); got != tt.want {
			t.Errorf("penalty(%v, %v) = %v, want %v (symmetry)", tt.b, tt.a, got, tt.want)
		}
	}
}
