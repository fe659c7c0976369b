package fsm

import (
	"sort"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// A dropped VChannel keeps its checkpoint as the dropped sentinel, so a
// late report about it is refused as "vchannel is dropped" and
// GetRecoveryInfo answers it as dropped (docs/semantics.md#dropped-vchannels).
// Kept forever, the sentinels would grow the state with every collection
// ever dropped; PruneDroppedVChannels forgets them once their retention
// has passed and nothing of the VChannel is left.

// applyPruneDroppedVChannels forgets, oldest drop first, up to max_count
// dropped VChannels past retention_ms (PrunableDroppedVChannels).
func applyPruneDroppedVChannels(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.PruneDroppedVChannels)
	if r := checkDecisionTerm(next, c.Type, b.DecisionTerm); r != nil {
		return r
	}
	names := next.PrunableDroppedVChannels(c.ProposedAtUnixMs-b.RetentionMs, int(b.MaxCount))
	for _, v := range names {
		next.seg.cps = next.seg.cps.Delete(v)
	}
	return &logpb.Result{Value: &logpb.Result_Vchannels{Vchannels: &logpb.VChannelList{Vchannels: names}}}
}

// PrunableDroppedVChannels lists, oldest drop first (then by name), up to
// max VChannels whose checkpoint is the dropped sentinel set at or before
// cutoffMs, that no live collection holds and that have no segment left
// (their Dropped segments are pruned first, PrunableDropped). Apply and
// the leader's decision to propose a prune use it alike. It reads every
// checkpoint: one pass over the channel table, bounded by the state.
func (s *State) PrunableDroppedVChannels(cutoffMs int64, max int) []string {
	type candidate struct {
		ms   int64
		name string
	}
	var cs []candidate
	for it := s.seg.cps.Iterator(); !it.Done(); {
		name, cp, _ := it.Next()
		if !cp.Dropped() || cp.UpdatedMs > cutoffMs {
			continue
		}
		if _, live := s.knownVChannel(name); live || s.hasSegmentsOn(name) {
			continue
		}
		cs = append(cs, candidate{cp.UpdatedMs, name})
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].ms != cs[j].ms {
			return cs[i].ms < cs[j].ms
		}
		return cs[i].name < cs[j].name
	})
	out := make([]string, 0, min(max, len(cs)))
	for _, c := range cs[:min(max, len(cs))] {
		out = append(out, c.name)
	}
	return out
}

// hasSegmentsOn: some segment, in any state, is on vchannel.
func (s *State) hasSegmentsOn(vchannel string) bool {
	it := s.seg.byChan.Iterator()
	it.Seek(chanSegKey{vchannel, 0})
	if it.Done() {
		return false
	}
	k, _, _ := it.Next()
	return k.vch == vchannel
}
