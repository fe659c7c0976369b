package policy

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// maxDFSLeaves bounds the rebalance search of one round: the number of
// channels taken off for the exhaustive search is reduced until
// nodes^channels ≤ maxDFSLeaves (with the default MaxStep 3 this only bites
// above 101 nodes).
const maxDFSLeaves = 1 << 20

// vchannelFair is Milvus's vchannelFair policy
// (docs/semantics.md#balance-policy).
type vchannelFair struct {
	cfg Config
}

// NewVChannelFair builds the vchannelFair policy; an invalid config is an
// error.
func NewVChannelFair(c Config) (Policy, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &vchannelFair{cfg: c}, nil
}

// Name implements Policy.
func (*vchannelFair) Name() string { return VChannelFairName }

// Balance implements Policy:
//  1. ErrNoNodes without nodes;
//  2. keep every channel whose Node is one of the nodes;
//  3. place the others, most VChannels first (ties: name ascending), each on
//     the node giving the lowest global score (ties: smaller node ID);
//  4. without AllowRebalance, return that;
//  5. up to RebalanceMaxStep times take off the movable channel whose
//     removal leaves the lowest global score (ties: smaller name); while
//     some node holds fewer than ⌊channels/nodes⌋ PChannels after step 3
//     (a new or refilled node), every channel on a node holding more is
//     movable whatever its age (fillExemption);
//  6. try every node for every channel taken off (first best leaf in
//     ascending node order wins);
//  7. return the search result only if it beats the step-3 score by more
//     than RebalanceTolerance, else the step-3 assignment.
func (p *vchannelFair) Balance(l Layout) (map[string]uint64, error) {
	if len(l.Channels) > MaxChannels {
		return nil, fmt.Errorf("%w: %d channels, at most %d allowed", ErrInvalidLayout, len(l.Channels), MaxChannels)
	}
	nodes, err := canonicalNodes(l.Nodes)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, ErrNoNodes
	}
	r, err := newRound(p.cfg, l, nodes)
	if err != nil {
		return nil, err
	}

	// Step 2: keep healthy placements. Channels are placed in name order,
	// which makes every node's pair sum canonical (see pairSumOf).
	for c := range r.chans {
		if k := r.chans[c].keep; k >= 0 {
			r.place(c, k)
		}
	}

	// Step 3: place the rest.
	pending := make([]int, 0, len(r.chans))
	for c := range r.chans {
		if r.chans[c].keep < 0 {
			pending = append(pending, c)
		}
	}
	slices.SortStableFunc(pending, func(a, b int) int {
		return cmp.Compare(r.chans[b].vcount, r.chans[a].vcount)
	})
	for _, c := range pending {
		// Placing c on n changes only n's cost, so the node with the lowest
		// global score is the one with the smallest cost delta. Comparing
		// deltas keeps ties between equally loaded nodes exact (the summation
		// order of the global score cannot break them); near-ties within
		// rounding noise also go to the smaller node ID.
		eps := tieEpsilon(r.score())
		best, bestDelta := 0, math.Inf(1)
		for n := range r.nodes {
			if d := r.deltaIfPlaced(c, n); d < bestDelta-eps {
				best, bestDelta = n, d
			}
		}
		r.place(c, best)
	}
	snapshot := slices.Clone(r.assign)

	// Step 4.
	steps := dfsDepth(len(nodes), p.cfg.RebalanceMaxStep)
	if !p.cfg.AllowRebalance || steps == 0 || len(nodes) == 1 || len(r.chans) == 0 {
		return r.output(snapshot), nil
	}

	// Step 5: take off the channels whose removal helps most.
	r.fillExemption()
	removed := make([]int, 0, steps)
	for range steps {
		eps := tieEpsilon(r.score())
		pick, pickDelta := -1, math.Inf(1)
		for c := range r.chans {
			if r.assign[c] < 0 || !r.chans[c].movable {
				continue
			}
			if d := r.deltaIfRemoved(c); d < pickDelta-eps {
				pick, pickDelta = c, d
			}
		}
		if pick < 0 {
			break
		}
		r.remove(pick)
		removed = append(removed, pick)
	}
	if len(removed) == 0 {
		return r.output(snapshot), nil
	}

	// Step 6: exhaustive search over the removed channels.
	search := dfs{
		r:         r,
		removed:   removed,
		choice:    make([]int, len(removed)),
		best:      make([]int, len(removed)),
		bestScore: math.Inf(1),
		eps:       tieEpsilon(r.canonicalScore(snapshot)),
	}
	search.run(0)
	if !search.found {
		return r.output(snapshot), nil
	}
	candidate := slices.Clone(r.assign)
	for i, c := range removed {
		candidate[c] = search.best[i]
	}

	// Step 7: accept only a real improvement. Both layouts are rescored from
	// scratch in canonical order, so a layout equal to the snapshot can never
	// look better through rounding; the tiny epsilon keeps rounding noise
	// between mathematically equal layouts from moving channels when the
	// tolerance is 0.
	cur := r.canonicalScore(snapshot)
	next := r.canonicalScore(candidate)
	eps := 1e-9 * math.Max(1, math.Abs(cur))
	if next < cur-p.cfg.RebalanceTolerance-eps {
		return r.output(candidate), nil
	}
	return r.output(snapshot), nil
}

// canonicalNodes sorts and de-duplicates the node IDs; 0 is reserved for
// "unassigned".
func canonicalNodes(in []uint64) ([]uint64, error) {
	nodes := slices.Clone(in)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) > 0 && nodes[0] == 0 {
		return nil, fmt.Errorf("%w: node ID 0 is reserved for unassigned channels", ErrInvalidLayout)
	}
	return nodes, nil
}

// dfsDepth is how many channels the rebalance search may take off:
// maxStep, reduced until nodes^depth ≤ maxDFSLeaves.
func dfsDepth(nodes, maxStep int) int {
	depth, leaves := 0, 1
	for depth < maxStep && leaves <= maxDFSLeaves/nodes {
		leaves *= nodes
		depth++
	}
	return depth
}

// movable reports whether a channel ASSIGNED at lastMs may be moved at nowMs:
// nowMs − lastMs ≥ interval (a last assign time in the future never is).
func movable(nowMs, lastMs int64, interval time.Duration) bool {
	if lastMs > nowMs {
		return false
	}
	age := uint64(nowMs) - uint64(lastMs) // exact: the true difference is in [0, 2^64)
	needMs := uint64(interval / time.Millisecond)
	if interval%time.Millisecond != 0 {
		needMs++
	}
	return age >= needMs
}

// fillExemption marks movable, whatever its age, every kept channel on a
// node holding more than ⌊channels/nodes⌋ PChannels while some node holds
// fewer. MinRebalanceInterval exists to stop channels flapping between
// healthy nodes of a balanced placement; it must not keep a node that just
// joined (or came back, or was undrained) empty for the interval. Once every
// node holds at least its floor share, the interval applies again, so a
// balanced placement is never churned by it. Scores are untouched: the
// search still moves a channel only for a real improvement.
func (r *round) fillExemption() {
	floor := len(r.chans) / len(r.nodes)
	under := false
	for n := range r.nodes {
		if r.nodes[n].p < floor {
			under = true
		}
	}
	if !under {
		return
	}
	for c := range r.chans {
		if n := r.assign[c]; n >= 0 && r.nodes[n].p > floor {
			r.chans[c].movable = true
		}
	}
}

// nodeLoad is one node's share of the layout being built.
type nodeLoad struct {
	members []int // channel indices, ascending
	p, v    int   // PChannels and VChannels held
	pairSum float64
	cost    float64
}

// round is the state of one Balance call.
type round struct {
	cfg    Config
	nodes  []nodeLoad // parallel to the sorted node IDs
	ids    []uint64
	chans  []profile // sorted by name
	assign []int     // channel index → node index, -1 when unassigned
	avgP   float64
	avgV   float64
}

func newRound(cfg Config, l Layout, nodes []uint64) (*round, error) {
	chans := make([]profile, len(l.Channels))
	totalV := 0
	for i, c := range l.Channels {
		if c.Name == "" {
			return nil, fmt.Errorf("%w: channel %d has an empty name", ErrInvalidLayout, i)
		}
		chans[i] = newProfile(c)
		totalV += len(c.Collections)
	}
	slices.SortFunc(chans, func(a, b profile) int { return cmp.Compare(a.name, b.name) })
	for i := 1; i < len(chans); i++ {
		if chans[i].name == chans[i-1].name {
			return nil, fmt.Errorf("%w: duplicate channel %q", ErrInvalidLayout, chans[i].name)
		}
	}
	// Node and last assign time come from the input channel of that name.
	byName := make(map[string]int, len(l.Channels)) // lookups only, never ranged
	for i := range chans {
		byName[chans[i].name] = i
	}
	for _, c := range l.Channels {
		pr := &chans[byName[c.Name]]
		if k, ok := slices.BinarySearch(nodes, c.Node); ok && c.Node != 0 {
			pr.keep = k
			pr.movable = cfg.AllowRebalance && movable(l.NowMs, c.LastAssignMs, cfg.MinRebalanceInterval)
		} else {
			pr.movable = true // placed in this round
		}
	}
	r := &round{
		cfg:    cfg,
		nodes:  make([]nodeLoad, len(nodes)),
		ids:    nodes,
		chans:  chans,
		assign: make([]int, len(chans)),
		avgP:   float64(len(chans)) / float64(len(nodes)),
		avgV:   float64(totalV) / float64(len(nodes)),
	}
	for i := range r.assign {
		r.assign[i] = -1
	}
	// An empty node costs wP + wV (when the averages are non-zero): the
	// global score is the sum over every node from the start.
	for n := range r.nodes {
		r.nodes[n].cost = r.cost(0, 0, 0)
	}
	return r, nil
}

// cost is the unbalance score of a node holding p PChannels with v
// VChannels and the given sum of pair penalties. Every product is rounded
// explicitly (float64(...)) so it cannot be fused into an FMA.
func (r *round) cost(p, v int, pairSum float64) float64 {
	c := 0.0
	if r.avgP != 0 {
		d := (float64(p) - r.avgP) / r.avgP
		c += float64(r.cfg.PChannelWeight * float64(d*d))
	}
	if r.avgV != 0 {
		d := (float64(v) - r.avgV) / r.avgV
		c += float64(r.cfg.VChannelWeight * float64(d*d))
	}
	c += float64(r.cfg.AntiAffinityWeight * pairSum)
	return c
}

// score is the global score of the current state, summed in node order.
func (r *round) score() float64 {
	s := 0.0
	for i := range r.nodes {
		s += r.nodes[i].cost
	}
	return s
}

// penaltyTo sums the penalties between channel c and the members (ascending,
// c itself skipped).
func (r *round) penaltyTo(c int, members []int) float64 {
	s := 0.0
	for _, m := range members {
		if m != c {
			s += penalty(&r.chans[c], &r.chans[m])
		}
	}
	return s
}

// deltaIfPlaced is how much the global score changes when unassigned
// channel c is placed on node n.
func (r *round) deltaIfPlaced(c, n int) float64 {
	nl := &r.nodes[n]
	return r.cost(nl.p+1, nl.v+r.chans[c].vcount, nl.pairSum+r.penaltyTo(c, nl.members)) - nl.cost
}

// deltaIfRemoved is how much the global score changes when assigned channel
// c is taken off its node.
func (r *round) deltaIfRemoved(c int) float64 {
	nl := &r.nodes[r.assign[c]]
	return r.cost(nl.p-1, nl.v-r.chans[c].vcount, nl.pairSum-r.penaltyTo(c, nl.members)) - nl.cost
}

// tieEpsilon is the margin below which two candidate scores (or deltas)
// count as a tie, so that rounding noise never overrides the explicit
// tie-breaks. It is far below any real score difference this policy can
// produce (weights times small rationals).
func tieEpsilon(scale float64) float64 {
	return 1e-12 * math.Max(1, math.Abs(scale))
}

// undo restores the node a place call changed.
type undo struct {
	c, n          int
	pairSum, cost float64
}

// place assigns unassigned channel c to node n.
func (r *round) place(c, n int) undo {
	nl := &r.nodes[n]
	u := undo{c: c, n: n, pairSum: nl.pairSum, cost: nl.cost}
	nl.pairSum += r.penaltyTo(c, nl.members)
	pos, _ := slices.BinarySearch(nl.members, c)
	nl.members = slices.Insert(nl.members, pos, c)
	nl.p++
	nl.v += r.chans[c].vcount
	nl.cost = r.cost(nl.p, nl.v, nl.pairSum)
	r.assign[c] = n
	return u
}

// revert undoes a place call exactly (the float state is restored, not
// recomputed).
func (r *round) revert(u undo) {
	nl := &r.nodes[u.n]
	r.dropMember(nl, u.c)
	nl.pairSum, nl.cost = u.pairSum, u.cost
}

// remove takes assigned channel c off its node for good and recomputes the
// node's pair sum canonically.
func (r *round) remove(c int) {
	nl := &r.nodes[r.assign[c]]
	r.dropMember(nl, c)
	nl.pairSum = r.pairSumOf(nl.members)
	nl.cost = r.cost(nl.p, nl.v, nl.pairSum)
}

func (r *round) dropMember(nl *nodeLoad, c int) {
	pos, _ := slices.BinarySearch(nl.members, c)
	nl.members = slices.Delete(nl.members, pos, pos+1)
	nl.p--
	nl.v -= r.chans[c].vcount
	r.assign[c] = -1
}

// pairSumOf is the canonical pair penalty sum of ascending members: for each
// member in order, the sum of its penalties to the earlier ones — exactly
// what placing them one by one in name order accumulates.
func (r *round) pairSumOf(members []int) float64 {
	s := 0.0
	for j, c := range members {
		s += r.penaltyTo(c, members[:j])
	}
	return s
}

// canonicalScore scores a complete assignment from scratch.
func (r *round) canonicalScore(assign []int) float64 {
	members := make([][]int, len(r.nodes))
	vs := make([]int, len(r.nodes))
	for c, n := range assign {
		members[n] = append(members[n], c)
		vs[n] += r.chans[c].vcount
	}
	s := 0.0
	for n := range r.nodes {
		s += r.cost(len(members[n]), vs[n], r.pairSumOf(members[n]))
	}
	return s
}

func (r *round) output(assign []int) map[string]uint64 {
	out := make(map[string]uint64, len(assign))
	for c, n := range assign {
		out[r.chans[c].name] = r.ids[n]
	}
	return out
}

// dfs is the exhaustive search of step 6.
type dfs struct {
	r         *round
	removed   []int
	choice    []int
	best      []int
	bestScore float64
	eps       float64 // a leaf must beat the best by more than this
	found     bool
}

func (d *dfs) run(depth int) {
	if depth == len(d.removed) {
		if s := d.r.score(); s < d.bestScore-d.eps {
			d.bestScore = s
			copy(d.best, d.choice)
			d.found = true
		}
		return
	}
	c := d.removed[depth]
	for n := range d.r.nodes {
		u := d.r.place(c, n)
		d.choice[depth] = n
		d.run(depth + 1)
		d.r.revert(u)
	}
}
