package policy

import (
	"cmp"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func genConfig(t *rapid.T, maxStep int) Config {
	weight := rapid.SampledFrom([]float64{0, 0.01, 0.3, 0.4, 1})
	return Config{
		PChannelWeight:       weight.Draw(t, "wP"),
		VChannelWeight:       weight.Draw(t, "wV"),
		AntiAffinityWeight:   weight.Draw(t, "wA"),
		RebalanceTolerance:   rapid.SampledFrom([]float64{0, 0.001, 0.01, 0.1}).Draw(t, "tolerance"),
		RebalanceMaxStep:     rapid.IntRange(0, maxStep).Draw(t, "maxStep"),
		AllowRebalance:       rapid.Bool().Draw(t, "allowRebalance"),
		MinRebalanceInterval: rapid.SampledFrom([]time.Duration{0, 5 * time.Minute}).Draw(t, "interval"),
	}
}

// genLayout draws channels on healthy nodes, dead nodes (99) and none (0),
// with random collections (repeats inside one channel included) and assign
// times before, at and after the 5m threshold (and in the future).
func genLayout(t *rapid.T, maxChannels, maxNodes int, collections int64) Layout {
	nodes := rapid.SliceOfNDistinct(rapid.Uint64Range(1, 12), 1, maxNodes, rapid.ID[uint64]).Draw(t, "nodes")
	where := rapid.SampledFrom(append(slices.Clone(nodes), 0, 99))
	when := rapid.SampledFrom([]int64{0, recentAssign, oldAssign, testNow - (5 * time.Minute).Milliseconds(), testNow + 5})
	n := rapid.IntRange(0, maxChannels).Draw(t, "channels")
	chs := make([]Channel, n)
	for i := range chs {
		chs[i] = Channel{
			Name:         fmt.Sprintf("c%02d", i),
			Collections:  rapid.SliceOfN(rapid.Int64Range(1, collections), 0, 4).Draw(t, "collections"),
			Node:         where.Draw(t, "node"),
			LastAssignMs: when.Draw(t, "lastAssign"),
		}
	}
	return Layout{Channels: chs, Nodes: nodes, NowMs: testNow}
}

func permuted(t *rapid.T, l Layout) Layout {
	return Layout{
		Channels: rapid.Permutation(l.Channels).Draw(t, "channelOrder"),
		Nodes:    rapid.Permutation(l.Nodes).Draw(t, "nodeOrder"),
		NowMs:    l.NowMs,
	}
}

// differing counts channels assigned differently by a and b.
func differing(a, b map[string]uint64) int {
	n := 0
	for k, v := range a {
		if b[k] != v {
			n++
		}
	}
	return n
}

// TestBalanceProperties checks the contract on random layouts.
func TestBalanceProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, 5)
		l := genLayout(t, 60, 8, 12)
		p, err := NewVChannelFair(cfg)
		if err != nil {
			t.Fatalf("NewVChannelFair: %v", err)
		}
		got, err := p.Balance(l)
		if err != nil {
			t.Fatalf("Balance: %v", err)
		}
		checkComplete(t, l, got)

		if m := moved(l, got); m > cfg.RebalanceMaxStep {
			t.Fatalf("moved %d healthy channels, MaxStep %d", m, cfg.RebalanceMaxStep)
		} else if !cfg.AllowRebalance && m != 0 {
			t.Fatalf("AllowRebalance=false moved %d healthy channels", m)
		}
		// Rebalance changes at most MaxStep channels of the no-rebalance
		// result.
		noReb := cfg
		noReb.AllowRebalance = false
		base, err := mustPolicy(t, noReb).Balance(l)
		if err != nil {
			t.Fatalf("Balance without rebalance: %v", err)
		}
		// Recently assigned channels on healthy nodes never move, unless
		// the placement leaves a node below its floor share and the
		// channel sits on a node above it (the fill exemption).
		held := perNode(base)
		floor := len(l.Channels) / max(1, len(slices.Compact(slices.Sorted(slices.Values(l.Nodes)))))
		under := false
		for _, n := range slices.Compact(slices.Sorted(slices.Values(l.Nodes))) {
			under = under || held[n] < floor
		}
		for _, c := range l.Channels {
			exempt := under && held[c.Node] > floor
			if slices.Contains(l.Nodes, c.Node) && !movable(l.NowMs, c.LastAssignMs, cfg.MinRebalanceInterval) && !exempt && got[c.Name] != c.Node {
				t.Fatalf("%s assigned at %d moved %d → %d", c.Name, c.LastAssignMs, c.Node, got[c.Name])
			}
		}
		if d := differing(base, got); d > cfg.RebalanceMaxStep {
			t.Fatalf("rebalance changed %d channels, MaxStep %d", d, cfg.RebalanceMaxStep)
		}
		// Input order does not matter.
		again, err := p.Balance(permuted(t, l))
		if err != nil {
			t.Fatalf("Balance (permuted): %v", err)
		}
		if !maps.Equal(got, again) {
			t.Fatalf("permuted input gave a different assignment:\n%v\n%v", got, again)
		}
	})
}

// TestBalanceMatchesExactReference compares Balance with refBalance, a
// straightforward transcription of the policy
// (docs/semantics.md#balance-policy) in exact rational arithmetic.
func TestBalanceMatchesExactReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := genConfig(t, 3)
		l := genLayout(t, 12, 4, 5)
		got, err := mustPolicy(t, cfg).Balance(l)
		if err != nil {
			t.Fatalf("Balance: %v", err)
		}
		want, err := refBalance(cfg, l)
		if err != nil {
			t.Fatalf("refBalance: %v", err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("Balance and the exact reference differ:\ngot  %v\nwant %v", got, want)
		}
	})
}

// refBalance is the policy written as plainly as possible: every score is the
// full global score recomputed from scratch with exact decimal big.Rat
// arithmetic (so ties are exact), affinity is
// computed with a map counter exactly as the spec words it.
func refBalance(cfg Config, l Layout) (map[string]uint64, error) {
	nodes := slices.Clone(l.Nodes)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) == 0 {
		return nil, ErrNoNodes
	}
	chs := slices.Clone(l.Channels)
	slices.SortFunc(chs, func(a, b Channel) int { return cmp.Compare(a.Name, b.Name) })
	// Weights are taken as the decimals they were written as (0.3 = 3/10),
	// so ties the configuration means to be exact are exact here.
	rat := func(f float64) *big.Rat {
		r, _ := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		return r
	}
	wP, wV, wA, tol := rat(cfg.PChannelWeight), rat(cfg.VChannelWeight), rat(cfg.AntiAffinityWeight), rat(cfg.RebalanceTolerance)
	totalV := 0
	for _, c := range chs {
		totalV += len(c.Collections)
	}
	avgP := big.NewRat(int64(len(chs)), int64(len(nodes)))
	avgV := big.NewRat(int64(totalV), int64(len(nodes)))

	affinity := func(a, b Channel) *big.Rat {
		counter := map[int64]int{}
		for _, id := range a.Collections {
			counter[id]++
		}
		for _, id := range b.Collections {
			counter[id]++
		}
		repeated := 0
		for _, n := range counter {
			if n > 1 {
				repeated += n
			}
		}
		if len(counter) == 0 {
			return big.NewRat(1, 1)
		}
		return big.NewRat(int64(len(counter)-repeated), int64(len(counter)))
	}
	sqTerm := func(w *big.Rat, x int, avg *big.Rat) *big.Rat {
		if avg.Sign() == 0 {
			return new(big.Rat)
		}
		d := new(big.Rat).Sub(big.NewRat(int64(x), 1), avg)
		d.Quo(d, avg)
		d.Mul(d, d)
		return d.Mul(d, w)
	}
	// assign: index into chs → index into nodes, -1 unassigned.
	score := func(assign []int) *big.Rat {
		total := new(big.Rat)
		for n := range nodes {
			var held []int
			v := 0
			for c, an := range assign {
				if an == n {
					held = append(held, c)
					v += len(chs[c].Collections)
				}
			}
			total.Add(total, sqTerm(wP, len(held), avgP))
			total.Add(total, sqTerm(wV, v, avgV))
			for i := range held {
				for j := i + 1; j < len(held); j++ {
					pen := new(big.Rat).Sub(big.NewRat(1, 1), affinity(chs[held[i]], chs[held[j]]))
					total.Add(total, pen.Mul(pen, wA))
				}
			}
		}
		return total
	}

	assign := make([]int, len(chs))
	canMove := make([]bool, len(chs))
	var pending []int
	for c, ch := range chs {
		assign[c] = slices.Index(nodes, ch.Node)
		if ch.Node == 0 {
			assign[c] = -1
		}
		if assign[c] < 0 {
			pending = append(pending, c)
			canMove[c] = true
		} else {
			canMove[c] = cfg.AllowRebalance && l.NowMs-ch.LastAssignMs >= cfg.MinRebalanceInterval.Milliseconds()
		}
	}
	slices.SortStableFunc(pending, func(a, b int) int {
		return cmp.Compare(len(chs[b].Collections), len(chs[a].Collections))
	})
	for _, c := range pending {
		bestNode := -1
		var best *big.Rat
		for n := range nodes {
			assign[c] = n
			if s := score(assign); best == nil || s.Cmp(best) < 0 {
				bestNode, best = n, s
			}
		}
		assign[c] = bestNode
	}
	output := func(a []int) map[string]uint64 {
		out := map[string]uint64{}
		for c, n := range a {
			out[chs[c].Name] = nodes[n]
		}
		return out
	}
	snapshot := slices.Clone(assign)
	if !cfg.AllowRebalance {
		return output(snapshot), nil
	}
	// A node below its floor share makes every channel on a fuller node
	// movable, recent or not.
	held := make([]int, len(nodes))
	for _, n := range assign {
		held[n]++
	}
	if floor := len(chs) / len(nodes); slices.Min(held) < floor {
		for c, n := range assign {
			if held[n] > floor {
				canMove[c] = true
			}
		}
	}
	var removed []int
	for range cfg.RebalanceMaxStep {
		pick := -1
		var pickScore *big.Rat
		for c := range chs {
			if assign[c] < 0 || !canMove[c] {
				continue
			}
			n := assign[c]
			assign[c] = -1
			if s := score(assign); pick < 0 || s.Cmp(pickScore) < 0 {
				pick, pickScore = c, s
			}
			assign[c] = n
		}
		if pick < 0 {
			break
		}
		assign[pick] = -1
		removed = append(removed, pick)
	}
	var best []int
	var bestScore *big.Rat
	var dfs func(i int)
	dfs = func(i int) {
		if i == len(removed) {
			if s := score(assign); best == nil || s.Cmp(bestScore) < 0 {
				best, bestScore = slices.Clone(assign), s
			}
			return
		}
		for n := range nodes {
			assign[removed[i]] = n
			dfs(i + 1)
		}
		assign[removed[i]] = -1
	}
	dfs(0)
	cur := score(snapshot)
	if best != nil && bestScore.Cmp(new(big.Rat).Sub(cur, tol)) < 0 {
		return output(best), nil
	}
	return output(snapshot), nil
}
