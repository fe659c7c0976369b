package fsm

import (
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Import segments (docs/semantics.md#import-segments): an import or copy
// job writes a segment's files and its complete manifest revision on the
// VChannel's owner, then publishes the pointer inline — a single writer,
// fenced like a flush by the (node, PChannel term) owner check and by the
// pointer's version, with no per-segment lock and no base re-check.
//
//	— CreateImportSegment → Importing → FinishImportSegment → Flushed
//	                                  ↘ (collection dropped) → Dropped

func importResult(version int64, st logpb.SegmentState, unchanged bool) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_ImportFinished{ImportFinished: &logpb.ImportFinished{Version: version, State: st, Unchanged: unchanged}}}
}

// applyCreateImportSegment creates an Importing segment (StorageV3, no
// pointer) for the VChannel's current owner. Its ID comes from the global
// ID space.
func applyCreateImportSegment(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.CreateImportSegment)
	return createOwnedSegment(next, c, "create import segment", b.NodeId, b.PchannelTerm, Segment{
		CollectionID: b.CollectionId, PartitionID: b.PartitionId, VChannel: b.Vchannel,
		State: logpb.SegmentState_SEGMENT_IMPORTING, Level: b.Level, StorageVersion: StorageV3,
	})
}

// applyFinishImportSegment publishes an import's pointer and row count and
// makes the segment Flushed (Dropped when it holds no rows), in one step:
//   - the caller must be the VChannel's current owner, else stale;
//   - an unknown segment is NotFound, a Dropped one NotFound (terminal);
//   - the segment must be of the named collection and VChannel (conflict);
//   - a Flushed segment holding exactly this pointer is an acknowledged
//     no-op (the retry of a finish that committed); any other pointer on a
//     Flushed segment is stale; any other state is a conflict;
//   - the pointer must lie at the segment's own base (invalid), be newer
//     than its current one (stale, with both versions) and not be retired
//     by the orphan collector (invalid).
func applyFinishImportSegment(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.FinishImportSegment)
	if err := next.CheckChannelOwner(b.Vchannel, b.NodeId, b.PchannelTerm); err != nil {
		return reject(logpb.RejectCode_REJECT_STALE, "finish import segment %d: %v", b.SegmentId, err)
	}
	g, ok := next.seg.segs.Get(b.SegmentId)
	if !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "segment %d does not exist", b.SegmentId)
	}
	if g.CollectionID != b.CollectionId || g.VChannel != b.Vchannel {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "segment %d belongs to collection %d vchannel %s", g.ID, g.CollectionID, g.VChannel)
	}
	if g.State == logpb.SegmentState_SEGMENT_DROPPED {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "segment %d is dropped", g.ID)
	}
	np, _ := commands.ParseManifestPointer(b.ManifestPath) // shape-validated
	cur, err := commands.ParseManifestPointer(g.ManifestPath)
	if err != nil {
		return reject(logpb.RejectCode_REJECT_INVALID, "segment %d holds a pointer this command cannot read: %v", g.ID, err)
	}
	switch g.State {
	case logpb.SegmentState_SEGMENT_IMPORTING:
	case logpb.SegmentState_SEGMENT_FLUSHED:
		if np == cur && g.NumRows == b.NumOfRows {
			return importResult(cur.Version, g.State, true)
		}
		return staleManifest(g.ID, np.Version, cur.Version, "the segment finished already with another pointer")
	default:
		return reject(logpb.RejectCode_REJECT_CONFLICT, "segment %d is %s; only an Importing segment can finish an import", g.ID, SegmentStateName(g.State))
	}
	if own, _ := ownManifestBase(g); np.Base != own {
		return reject(logpb.RejectCode_REJECT_INVALID, "finish import segment %d: manifest base %q, the segment's is %q", g.ID, np.Base, own)
	}
	if np.Version <= cur.Version {
		return staleManifest(g.ID, np.Version, cur.Version, "an import publishes a newer revision than the current one")
	}
	if rej := next.checkPublication(g, cur, np, true); rej != nil {
		return rej
	}
	ng := *g
	ng.ManifestPath, ng.StorageVersion = np.String(), StorageV3
	ng.NumRows, ng.LastWriteMs = b.NumOfRows, c.ProposedAtUnixMs
	ng.State = logpb.SegmentState_SEGMENT_FLUSHED
	if ng.NumRows == 0 {
		ng.State, ng.DroppedMs = logpb.SegmentState_SEGMENT_DROPPED, c.ProposedAtUnixMs
	}
	next.seg.put(&ng)
	return importResult(np.Version, ng.State, false)
}
