package main

import (
	"fmt"
	"testing"
)

// batchSet is n VChannels over 16 PChannels, PChannel k owned by node
// 1 + k%2 at term 3.
func batchSet(n int) *dataSet {
	d := &dataSet{}
	m := map[string]owner{}
	for i := range n {
		p := fmt.Sprintf("pc-%d", i%16)
		d.vchs = append(d.vchs, dataVch{name: fmt.Sprintf("%s_v%d", p, i), pchannel: p})
		m[p] = owner{node: uint64(1 + (i%16)%2), term: 3}
	}
	d.owners.Store(&m)
	return d
}

// A call carries distinct VChannels of one owner, at most 128, with the
// owner's current term; successive calls cover every VChannel the client
// owns.
func TestCheckpointWindow(t *testing.T) {
	d := batchSet(dataVChannels)
	for _, clients := range []int{1, 7, 64} {
		for c := range min(clients, 3) {
			mine := d.mine(c, clients)
			covered := map[string]bool{}
			for i := range 40 {
				w := checkpointWindow(d, mine, i)
				seen := map[string]bool{}
				for _, v := range w {
					if v.node != w[0].node || v.term != 3 || seen[v.name] {
						t.Fatalf("clients %d call %d: %+v in a call for node %d (seen %v)", clients, i, v, w[0].node, seen[v.name])
					}
					seen[v.name], covered[v.name] = true, true
				}
				if len(w) == 0 || len(w) > checkpointBatch {
					t.Fatalf("clients %d call %d carries %d", clients, i, len(w))
				}
			}
			if len(covered) != len(mine) {
				t.Fatalf("clients %d, client %d: 40 calls covered %d of its %d VChannels", clients, c, len(covered), len(mine))
			}
		}
	}
	// One client of 1,000 over two owners: calls of 128, alternating owners.
	mine := d.mine(0, 1)
	a, b := checkpointWindow(d, mine, 0), checkpointWindow(d, mine, 1)
	if len(a) != checkpointBatch || len(b) != checkpointBatch || a[0].node == b[0].node {
		t.Fatalf("one client: calls of %d (node %d) and %d (node %d)", len(a), a[0].node, len(b), b[0].node)
	}
	// A client whose VChannels all have one owner sends them all at once.
	mine = d.mine(5, 64)
	if w := checkpointWindow(d, mine, 0); len(w) != len(mine) {
		t.Fatalf("64 clients: a call carries %d of the client's %d VChannels", len(w), len(mine))
	}
}

// After an owner change the next call follows the new owner.
func TestCheckpointWindowFollowsTheOwner(t *testing.T) {
	d := batchSet(32)
	mine := d.mine(0, 16) // pc-0's two VChannels
	if w := checkpointWindow(d, mine, 0); w[0].node != 1 || len(w) != 2 {
		t.Fatalf("before: %+v", w)
	}
	m := map[string]owner{"pc-0": {node: 2, term: 4}}
	d.owners.Store(&m)
	if w := checkpointWindow(d, mine, 1); w[0].node != 2 || w[0].term != 4 || len(w) != 2 {
		t.Fatalf("after the move: %+v", w)
	}
}
