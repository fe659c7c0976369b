package datapath

import (
	"context"
	"fmt"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Import segments (docs/semantics.md#import-segments): an import or copy
// job on the VChannel's owner creates an Importing segment, writes its
// files and manifest revision, then publishes the pointer inline with one
// FinishImportSegment command; Apply runs the owner and version checks.

// CreatedImport is a new Importing segment and where its manifest goes.
type CreatedImport struct {
	SegmentID    int64
	ManifestBase string
}

// CreateImportSegment creates an Importing segment for the caller.
func (s *Service) CreateImportSegment(ctx context.Context, c CreateImport) (CreatedImport, error) {
	res, err := commands.Commit(ctx, s.l, c.cmd, commands.CallerNode(c.Caller))
	if err != nil {
		return CreatedImport{}, err
	}
	ids := res.GetSegments().GetIds()
	if len(ids) != 1 {
		return CreatedImport{}, fmt.Errorf("create import segment: the command answered %d segment ids", len(ids))
	}
	return CreatedImport{SegmentID: ids[0], ManifestBase: commands.ManifestBase(c.collection, c.partition, ids[0])}, nil
}

// FinishImportSegment publishes an import's pointer and row count, once
// the named manifest revision checks out in the object store.
func (s *Service) FinishImportSegment(ctx context.Context, c FinishImport) (*logpb.ImportFinished, error) {
	if err := s.revisions.CheckNamedRevision(ctx, s.l.State(), c.segment, c.manifestPath); err != nil {
		return nil, err
	}
	res, err := commands.Commit(ctx, s.l, c.cmd, commands.CallerNode(c.Caller))
	if err != nil {
		return nil, err
	}
	return res.GetImportFinished(), nil
}
