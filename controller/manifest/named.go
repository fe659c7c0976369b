package manifest

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/objectstore"
)

// CheckNamedRevision is the leader's existence check for a pointer a
// single-writer path names (SaveBinlogPaths' manifest_path,
// FinishImportSegment, docs/semantics.md#manifest-commit): the revision
// must exist in the store and be that segment's revision of that version,
// with every key under the segment's directories. It fails fast with
// commands.ErrInvalid before anything is proposed; Apply itself cannot see the
// store, and refuses what it can check (the segment's own base, retired
// versions). Nothing is checked without a store, for an unknown segment
// (Apply answers that), or for the pointer the segment already holds (a
// retried save).
func (c *Committer) CheckNamedRevision(ctx context.Context, st *fsm.State, seg int64, pointer string) error {
	if c == nil || c.cfg.Store == nil || pointer == "" {
		return nil
	}
	g, ok := st.Segment(seg)
	if !ok || g.ManifestPath == pointer {
		return nil
	}
	p, err := commands.ParseManifestPointer(pointer)
	if err != nil || p.Version == 0 {
		return nil // the command's own validation answers
	}
	rev, err := c.read(ctx, p)
	if errors.Is(err, objectstore.ErrNotFound) {
		return invalidf("segment %d: manifest revision %s does not exist", seg, p.Key())
	}
	if err != nil {
		if errors.Is(err, errCodec) {
			return invalidf("segment %d: manifest revision %s: %v", seg, p.Key(), err)
		}
		return fmt.Errorf("read manifest revision %s: %w", p.Key(), err)
	}
	if rev.SegmentId != seg || rev.Version != p.Version {
		return invalidf("segment %d: %s holds segment %d version %d", seg, p.Key(), rev.SegmentId, rev.Version)
	}
	if err := checkRevisionKeys(rev, g.CollectionID, g.PartitionID); err != nil {
		return invalidf("segment %d: manifest revision %s: %v", seg, p.Key(), err)
	}
	return nil
}
