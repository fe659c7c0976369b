package policy

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchLayout is 256 PChannels over 8 nodes carrying 200 collections of 1–4
// shards each (every shard on a distinct random PChannel); three quarters of
// the channels sit on random nodes (old enough to move), the rest must be
// placed. A round therefore does placement, removal and the full 8^3 search.
func benchLayout() Layout {
	r := rand.New(rand.NewPCG(42, 256))
	const channels = 256
	chs := make([]Channel, channels)
	for i := range chs {
		chs[i].Name = fmt.Sprintf("by-dev-rootcoord-dml_%d", i)
	}
	for coll := int64(1); coll <= 200; coll++ {
		for _, i := range r.Perm(channels)[:1+r.IntN(4)] {
			chs[i].Collections = append(chs[i].Collections, 1000+coll)
		}
	}
	nodes := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	for i := range chs {
		if r.IntN(4) != 0 {
			chs[i].Node = nodes[r.IntN(len(nodes))]
			chs[i].LastAssignMs = oldAssign
		}
	}
	return Layout{Channels: chs, Nodes: nodes, NowMs: testNow}
}

func BenchmarkVChannelFair256x8(b *testing.B) {
	l := benchLayout()
	p := mustPolicy(b, DefaultConfig())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Balance(l); err != nil {
			b.Fatal(err)
		}
	}
}
