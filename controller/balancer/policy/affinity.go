package policy

import "slices"

// profile is one channel prepared for scoring.
type profile struct {
	name    string
	vcount  int     // number of VChannels
	colls   []int64 // distinct collection IDs, ascending
	counts  []int   // VChannels of colls[i] on this channel
	selfRep int     // sum of counts[i] over counts[i] > 1
	sig     uint64  // one bit per collection (hashed); 0 when no VChannels
	keep    int     // index of the healthy node holding it, or -1
	movable bool    // rebalance may move it
}

func newProfile(c Channel) profile {
	p := profile{name: c.Name, vcount: len(c.Collections), keep: -1}
	if len(c.Collections) == 0 {
		return p
	}
	sorted := slices.Clone(c.Collections)
	slices.Sort(sorted)
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] == sorted[i] {
			j++
		}
		n := j - i
		p.colls = append(p.colls, sorted[i])
		p.counts = append(p.counts, n)
		if n > 1 {
			p.selfRep += n
		}
		p.sig |= 1 << (mix64(uint64(sorted[i])) & 63)
		i = j
	}
	return p
}

// mix64 is the splitmix64 finaliser; it only spreads collection IDs over the
// 64 signature bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// penalty is 1 − affinity(a, b) (docs/semantics.md#balance-policy): count
// every collection over the VChannels of both channels; repeated = sum of the
// counts above 1, distinct = number of collections; affinity = (distinct −
// repeated) / distinct, or 1 when both channels are empty. So penalty =
// repeated / distinct, which exceeds 1 when affinity is negative.
func penalty(a, b *profile) float64 {
	if a.selfRep == 0 && b.selfRep == 0 && a.sig&b.sig == 0 {
		// No collection in common and none repeated inside either channel
		// (this includes both being empty): affinity is exactly 1.
		return 0
	}
	distinct, repeated := 0, 0
	i, j := 0, 0
	for i < len(a.colls) || j < len(b.colls) {
		var n int
		switch {
		case j == len(b.colls) || (i < len(a.colls) && a.colls[i] < b.colls[j]):
			n = a.counts[i]
			i++
		case i == len(a.colls) || b.colls[j] < a.colls[i]:
			n = b.counts[j]
			j++
		default:
			n = a.counts[i] + b.counts[j]
			i++
			j++
		}
		distinct++
		if n > 1 {
			repeated += n
		}
	}
	if repeated == 0 {
		return 0
	}
	return float64(repeated) / float64(distinct)
}
