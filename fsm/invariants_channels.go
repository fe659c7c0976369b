package fsm

import (
	"fmt"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// checkChannelInvariants verifies the channel subsystem's structural
// invariants (docs/semantics.md#channel-invariants) on one state.
func (s *State) checkChannelInvariants() error {
	m := s.ch.meta
	if m.NextNodeId == 0 {
		return fmt.Errorf("next streaming node id is 0 (ids start at 1)")
	}
	if m.Initialized {
		if _, ok := s.ch.pchannels.Get(vocab.PChannelOf(m.Cchannel)); !ok {
			return fmt.Errorf("cchannel %s is bound to a missing pchannel", m.Cchannel)
		}
	}
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		name, p, _ := it.Next()
		if p.Name != name || p.Term < 1 {
			return fmt.Errorf("pchannel record %q: name %q term %d", name, p.Name, p.Term)
		}
		if p.State == logpb.PChannelState_PCHANNEL_ASSIGNED && len(p.Histories) > 0 {
			return fmt.Errorf("pchannel %s is ASSIGNED with %d histories", name, len(p.Histories))
		}
		if p.State != logpb.PChannelState_PCHANNEL_UNINITIALIZED && p.NodeId == 0 {
			return fmt.Errorf("pchannel %s is %s without a node", name, p.State)
		}
		seen := map[[2]uint64]bool{}
		for _, h := range p.Histories {
			k := [2]uint64{h.NodeId, uint64(h.Mode)}
			if seen[k] {
				return fmt.Errorf("pchannel %s has two histories for node %d mode %s", name, h.NodeId, h.Mode)
			}
			seen[k] = true
			if h.Term >= p.Term {
				return fmt.Errorf("pchannel %s history term %d is not below current term %d", name, h.Term, p.Term)
			}
		}
	}
	live := map[string]uint64{}
	for it := s.ch.nodes.Iterator(); !it.Done(); {
		id, n, _ := it.Next()
		if n.Id != id || id == 0 || id >= m.NextNodeId {
			return fmt.Errorf("streaming node record %d: id %d, next id %d", id, n.Id, m.NextNodeId)
		}
		if n.State != logpb.NodeState_NODE_DOWN {
			if other, dup := live[n.Address]; dup {
				return fmt.Errorf("nodes %d and %d are both live at %s", other, id, n.Address)
			}
			live[n.Address] = id
		}
	}
	counts := map[string]int{}
	for it := s.ch.collections.Iterator(); !it.Done(); {
		_, c, _ := it.Next()
		pcs := map[string]bool{}
		for _, v := range c.Vchannels {
			p := vocab.PChannelOf(v)
			if pcs[p] {
				return fmt.Errorf("collection %d has two vchannels on pchannel %s", c.CollectionId, p)
			}
			pcs[p] = true
			counts[p]++
		}
	}
	if len(counts) != s.ch.vcount.Len() {
		return fmt.Errorf("vchannel counts cover %d pchannels, collections %d", s.ch.vcount.Len(), len(counts))
	}
	for p, n := range counts {
		if s.VChannelCount(p) != n {
			return fmt.Errorf("pchannel %s: counted %d vchannels, recorded %d", p, n, s.VChannelCount(p))
		}
	}
	return nil
}
