package fsm

import (
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// applyInitStreaming records the cluster ID, creates the initial PChannels
// and binds the CChannel to the first of them, once. A repeat with the same
// cluster ID only adds missing PChannels.
func applyInitStreaming(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.InitStreaming)
	if next.ch.meta.Initialized {
		if next.ch.meta.ClusterId != b.ClusterId {
			return reject(logpb.RejectCode_REJECT_CONFLICT, "streaming already initialized for cluster %q, not %q",
				next.ch.meta.ClusterId, b.ClusterId)
		}
		return addPChannels(next, b.Pchannels)
	}
	if r := addPChannels(next, b.Pchannels); r.Rejection != nil {
		return r
	}
	next.setMeta(func(m *logpb.ChannelsMeta) {
		m.Initialized = true
		m.ClusterId = b.ClusterId
		m.Cchannel = vocab.CChannelName(b.Pchannels[0])
	})
	return accepted()
}

// applyAddPChannels creates missing PChannels as UNINITIALIZED at term 1. It
// is idempotent and does not bump the assignment version: unassigned channels
// are not an observable change (docs/semantics.md#assignment-stream).
func applyAddPChannels(next *State, c commands.Command) *logpb.Result {
	if !next.ch.meta.Initialized {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "streaming is not initialized yet")
	}
	return addPChannels(next, c.Body.(*logpb.AddPChannels).Pchannels)
}

func addPChannels(next *State, names []string) *logpb.Result {
	added := 0
	for _, n := range names {
		if _, exists := next.ch.pchannels.Get(n); !exists {
			added++
		}
	}
	if next.ch.pchannels.Len()+added > MaxPChannels {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "adding %d pchannels would exceed %d", added, MaxPChannels)
	}
	for _, n := range names {
		if _, exists := next.ch.pchannels.Get(n); exists {
			continue
		}
		next.ch.pchannels = next.ch.pchannels.Set(n, &logpb.PChannelRecord{
			Name: n, Term: 1, State: logpb.PChannelState_PCHANNEL_UNINITIALIZED,
		})
	}
	return &logpb.Result{Value: &logpb.Result_Number{Number: uint64(added)}}
}

// applyAssignPChannels is phase one of an assignment
// (docs/semantics.md#pchannel-assignment): for each channel, check the
// decision was made on the current term, then bump the term and record the
// target and the placement to clean up. All or nothing: one bad assignment
// rejects the command.
func applyAssignPChannels(next *State, c commands.Command) *logpb.Result {
	as := c.Body.(*logpb.AssignPChannels).Assignments
	for _, a := range as {
		p, ok := next.ch.pchannels.Get(a.Pchannel)
		if !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "pchannel %s does not exist", a.Pchannel)
		}
		if p.Term != a.ExpectedTerm {
			return reject(logpb.RejectCode_REJECT_STALE, "pchannel %s is at term %d, the assignment expected %d",
				a.Pchannel, p.Term, a.ExpectedTerm)
		}
		n, ok := next.ch.nodes.Get(a.NodeId)
		if !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "streaming node %d does not exist", a.NodeId)
		}
		if n.State != logpb.NodeState_NODE_UP {
			return reject(logpb.RejectCode_REJECT_CONFLICT, "streaming node %d is %s and cannot take channels", a.NodeId, n.State)
		}
	}
	var assigned []*logpb.PChannelTerm
	for _, a := range as {
		p, _ := next.ch.pchannels.Get(a.Pchannel)
		np, modified := tryAssign(p, a.NodeId, a.Mode)
		if !modified {
			continue
		}
		if len(assigned) == 0 {
			next.bumpVersion()
		}
		next.putPChannel(np)
		assigned = append(assigned, &logpb.PChannelTerm{Pchannel: np.Name, Term: np.Term})
	}
	return &logpb.Result{Value: &logpb.Result_Assign{Assign: &logpb.AssignResult{Assigned: assigned}}}
}

// tryAssign is the PChannel state machine (docs/semantics.md#pchannels) for
// one channel: it returns the new record and whether anything changed.
func tryAssign(p *logpb.PChannelRecord, node uint64, mode logpb.AccessMode) (*logpb.PChannelRecord, bool) {
	if p.State == logpb.PChannelState_PCHANNEL_ASSIGNED && p.NodeId == node && p.Mode == mode {
		return p, false
	}
	np := clonePChannel(p)
	if p.State != logpb.PChannelState_PCHANNEL_UNINITIALIZED {
		np.Histories = upsertHistory(np.Histories, &logpb.PChannelHistory{Term: p.Term, NodeId: p.NodeId, Mode: p.Mode})
	}
	np.Term++
	np.NodeId, np.Mode = node, mode
	np.State = logpb.PChannelState_PCHANNEL_ASSIGNING
	return np, true
}

// upsertHistory keeps at most one entry per (node, mode): a placement already
// remembered gets the newer term instead of a second entry
// (docs/semantics.md#pchannel-assignment).
func upsertHistory(hs []*logpb.PChannelHistory, h *logpb.PChannelHistory) []*logpb.PChannelHistory {
	for i, e := range hs {
		if e.NodeId == h.NodeId && e.Mode == h.Mode {
			out := append([]*logpb.PChannelHistory(nil), hs...)
			out[i] = h
			return out
		}
	}
	return append(append([]*logpb.PChannelHistory(nil), hs...), h)
}

// applyAssignPChannelsDone is phase two: the target opened the WAL at the
// exact term, every history node was cleaned, so the channel is ASSIGNED
// and its histories are dropped. Stale or repeated reports change nothing.
func applyAssignPChannelsDone(next *State, c commands.Command) *logpb.Result {
	items := c.Body.(*logpb.AssignPChannelsDone).Channels
	return movePChannelsAtTerm(next, items, logpb.PChannelState_PCHANNEL_ASSIGNING, func(np *logpb.PChannelRecord, _ *logpb.PChannelTerm) {
		np.State = logpb.PChannelState_PCHANNEL_ASSIGNED
		np.Histories = nil
		np.LastAssignMs = c.ProposedAtUnixMs
		np.LastError, np.LastErrorMs, np.FailedAttempts = "", 0, 0
	})
}

// applyMarkPChannelsUnavailable: an ASSIGNED channel whose WAL broke at the
// reported term becomes UNAVAILABLE; a report about another term is stale and
// ignored (docs/semantics.md#pchannel-terms).
func applyMarkPChannelsUnavailable(next *State, c commands.Command) *logpb.Result {
	items := c.Body.(*logpb.MarkPChannelsUnavailable).Channels
	return movePChannelsAtTerm(next, items, logpb.PChannelState_PCHANNEL_ASSIGNED, func(np *logpb.PChannelRecord, it *logpb.PChannelTerm) {
		np.State = logpb.PChannelState_PCHANNEL_UNAVAILABLE
		np.LastError, np.LastErrorMs = it.Reason, c.ProposedAtUnixMs
	})
}

// movePChannelsAtTerm applies a term-fenced report to each listed channel:
// one that is in state from at exactly the reported term gets a copy with
// edit applied; any other is a stale or repeated report and is left alone.
// Every listed channel must exist (else nothing changes). The assignment
// version moves once if any channel moved; the result counts them.
func movePChannelsAtTerm(next *State, items []*logpb.PChannelTerm, from logpb.PChannelState, edit func(np *logpb.PChannelRecord, it *logpb.PChannelTerm)) *logpb.Result {
	if r := requireKnownPChannels(next, items); r != nil {
		return r
	}
	moved := 0
	for _, it := range items {
		p, _ := next.ch.pchannels.Get(it.Pchannel)
		if p.State != from || p.Term != it.Term {
			continue
		}
		if moved == 0 {
			next.bumpVersion()
		}
		moved++
		np := clonePChannel(p)
		edit(np, it)
		next.putPChannel(np)
	}
	return &logpb.Result{Value: &logpb.Result_Number{Number: uint64(moved)}}
}

// applyRecordAssignFailure keeps why the current assignment attempt failed,
// so a channel stuck in ASSIGNING explains itself. Not an assignment change.
func applyRecordAssignFailure(next *State, c commands.Command) *logpb.Result {
	it := c.Body.(*logpb.RecordAssignFailure).Channel
	p, ok := next.ch.pchannels.Get(it.Pchannel)
	if !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "pchannel %s does not exist", it.Pchannel)
	}
	if p.State != logpb.PChannelState_PCHANNEL_ASSIGNING || p.Term != it.Term {
		return reject(logpb.RejectCode_REJECT_STALE, "pchannel %s is %s at term %d, not ASSIGNING at %d",
			it.Pchannel, p.State, p.Term, it.Term)
	}
	np := clonePChannel(p)
	np.LastError, np.LastErrorMs = it.Reason, c.ProposedAtUnixMs
	np.FailedAttempts++
	next.ch.pchannels = next.ch.pchannels.Set(np.Name, np) // keeps its version: not observable
	return accepted()
}

func requireKnownPChannels(next *State, items []*logpb.PChannelTerm) *logpb.Result {
	for _, it := range items {
		if _, ok := next.ch.pchannels.Get(it.Pchannel); !ok {
			return reject(logpb.RejectCode_REJECT_NOT_FOUND, "pchannel %s does not exist", it.Pchannel)
		}
	}
	return nil
}
