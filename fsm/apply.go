package fsm

import (
	"fmt"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// applyFunc applies one decoded, shape-validated command to next (a private
// copy of the state's root) and returns its result. It must either return a
// rejection without touching next, or mutate next and return success.
type applyFunc func(next *State, c commands.Command) *logpb.Result

// handlers is the dispatch table: one small function per command type.
var handlers = map[commands.Type]applyFunc{
	commands.TypeLeaderEstablished:    applyLeaderEstablished,
	commands.TypeUpsertMember:         applyUpsertMember,
	commands.TypeRemoveMember:         applyRemoveMember,
	commands.TypeExtendTSOWindow:      applyExtendTSOWindow,
	commands.TypeReserveIDs:           applyReserveIDs,
	commands.TypeRaiseAllocatorFloors: applyRaiseAllocatorFloors,

	commands.TypeInitStreaming:                applyInitStreaming,
	commands.TypeAddPChannels:                 applyAddPChannels,
	commands.TypeAssignPChannels:              applyAssignPChannels,
	commands.TypeAssignPChannelsDone:          applyAssignPChannelsDone,
	commands.TypeMarkPChannelsUnavailable:     applyMarkPChannelsUnavailable,
	commands.TypeRecordAssignFailure:          applyRecordAssignFailure,
	commands.TypeRegisterStreamingNode:        applyRegisterStreamingNode,
	commands.TypeMarkStreamingNodeDown:        applyMarkStreamingNodeDown,
	commands.TypeSetStreamingNodeDrain:        applySetStreamingNodeDrain,
	commands.TypeAllocVirtualChannels:         applyAllocVirtualChannels,
	commands.TypeDropVirtualChannels:          applyDropVirtualChannels,
	commands.TypeUpdateReplicateConfiguration: applyUpdateReplicateConfiguration,
	commands.TypeResetReplicateRole:           applyResetReplicateRole,

	commands.TypeCreateBroadcast:          applyCreateBroadcast,
	commands.TypeAckBroadcast:             applyAckBroadcast,
	commands.TypeCompleteBroadcast:        applyCompleteBroadcast,
	commands.TypeAbandonBroadcast:         applyAbandonBroadcast,
	commands.TypePruneBroadcastTombstones: applyPruneBroadcastTombstones,

	commands.TypeCreateSegment:            applyCreateSegment,
	commands.TypeSealSegments:             applySealSegments,
	commands.TypeMarkSegmentsFlushing:     applyMarkSegmentsFlushing,
	commands.TypeSaveBinlogPaths:          applySaveBinlogPaths,
	commands.TypeUpdateChannelCheckpoints: applyUpdateChannelCheckpoints,
	commands.TypePruneDroppedSegments:     applyPruneDroppedSegments,
	commands.TypePruneDroppedVChannels:    applyPruneDroppedVChannels,
	commands.TypeCreateImportSegment:      applyCreateImportSegment,
	commands.TypeFinishImportSegment:      applyFinishImportSegment,

	commands.TypeCommitSegmentManifests:  applyCommitSegmentManifests,
	commands.TypeRetireManifestRevisions: applyRetireManifestRevisions,
	commands.TypeCreateToken:             applyCreateToken,
	commands.TypeRevokeToken:             applyRevokeToken,
}

// Apply applies the log entry at index and returns the new state and one
// result per command in the entry. An error means the entry is corrupt or
// from a newer binary; the caller must stop the replica (see package doc).
func (s *State) Apply(index uint64, data []byte) (*State, []*logpb.Result, error) {
	if index <= s.applied {
		return nil, nil, fmt.Errorf("apply index %d: already applied up to %d", index, s.applied)
	}
	cmds, err := commands.DecodeEntry(data)
	if err != nil {
		return nil, nil, fmt.Errorf("apply index %d: %w", index, err)
	}
	next := *s
	next.applied = index
	results := make([]*logpb.Result, len(cmds))
	for i, c := range cmds {
		r, err := next.applyOne(index, c)
		if err != nil {
			return nil, nil, fmt.Errorf("apply index %d command %d: %w", index, i, err)
		}
		results[i] = r
	}
	return &next, results, nil
}

// ApplyCommands encodes cmds as one entry and applies it; a convenience for
// tests and tools that build states without a raft log.
func (s *State) ApplyCommands(index uint64, cmds ...commands.Command) (*State, []*logpb.Result, error) {
	data, err := commands.EncodeEntry(cmds)
	if err != nil {
		return nil, nil, err
	}
	return s.Apply(index, data)
}

func (next *State) applyOne(index uint64, c commands.Command) (*logpb.Result, error) {
	if c.RequestID != "" {
		if prev, ok := next.dedup.byID.Get(c.RequestID); ok {
			return repeatOf(prev, c), nil
		}
	}
	r, err := next.dispatch(c)
	if err != nil {
		return nil, err
	}
	if c.RequestID != "" && r.GetRejection().GetCode() != logpb.RejectCode_REJECT_ORDER {
		// REJECT_ORDER says "not yet", not "no": the proposer sends the
		// same request again once the commands it was ordered behind took
		// effect, and that must be decided afresh.
		next.dedup = next.dedup.record(newDedupEntry(c, index, r))
	}
	return r, nil
}

func (next *State) dispatch(c commands.Command) (*logpb.Result, error) {
	if c.Body == nil {
		return accepted(), nil // an ignorable command this binary does not know
	}
	h, found := handlers[c.Type]
	if !found {
		return nil, fmt.Errorf("%w: no apply function for %s", commands.ErrUnknownType, c.Type)
	}
	if err := commands.Validate(c); err != nil {
		return reject(logpb.RejectCode_REJECT_INVALID, "%v", err), nil
	}
	if c.LeaderTerm != 0 && c.LeaderTerm < next.leader.term {
		return reject(logpb.RejectCode_REJECT_STALE,
			"%s proposed in term %d, but a leader established itself in term %d", c.Type, c.LeaderTerm, next.leader.term), nil
	}
	if r := next.checkCaller(c); r != nil {
		return r, nil
	}
	return h(next, c), nil
}

func accepted() *logpb.Result { return &logpb.Result{} }

func reject(code logpb.RejectCode, format string, args ...any) *logpb.Result {
	return &logpb.Result{Rejection: &logpb.Rejection{Code: code, Message: fmt.Sprintf(format, args...)}}
}
