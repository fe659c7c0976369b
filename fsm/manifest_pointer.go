package fsm

import (
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// inlinePointer is the manifest pointer a save leaves on the segment (the
// single-writer publication path, docs/semantics.md#manifest-commit): the
// stored one when the save names none; otherwise the named one, which must
// parse, lie at the segment's own base (checkPublication), not be retired
// by the orphan collector and not go back (the same pointer again is a
// no-op). nil with no rejection: the named pointer is older, so the save
// is stale. created: the save creates the segment (an L0 segment), which
// must then lie at or above the manifest creation floor to name a pointer.
func inlinePointer(next *State, g *Segment, b *logpb.SaveBinlogPaths, exists bool) (*string, *logpb.Result) {
	if b.ManifestPath == "" {
		return &g.ManifestPath, nil
	}
	np, err := commands.ParseManifestPointer(b.ManifestPath)
	if err != nil {
		return nil, reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: %v", g.ID, err)
	}
	if !exists {
		if rej := next.checkCreatable(g.ID); rej != nil {
			return nil, rej
		}
	}
	cur, err := commands.ParseManifestPointer(g.ManifestPath)
	if err != nil {
		return nil, reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: the stored pointer does not parse: %v", g.ID, err)
	}
	own, _ := ownManifestBase(g)
	if np.Base != own {
		return nil, reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: manifest base %q, the segment's is %q", g.ID, np.Base, own)
	}
	if !cur.IsZero() && np.Version < cur.Version {
		return nil, nil
	}
	if rej := next.checkPublication(g, cur, np, true); rej != nil {
		return nil, rej
	}
	out := np.String()
	return &out, nil
}
