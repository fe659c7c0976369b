package manifest

import (
	"slices"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Request is one segment's manifest commit, checked: NewRequest (or
// NewBatch, for a batch member) built it, so its shape, its request ID and
// its catalog mutation in the log's form are known to be valid. The API
// parses a request once, where it enters the member, and the committer
// takes only this type, so nothing checks the same request twice. It is
// read-only: the API request it was built from must not change afterwards.
type Request struct {
	req *coordpb.CommitSegmentManifestRequest
	// catalog is req.Catalog converted to the log's form (nil: none).
	catalog *logpb.ManifestCatalogMutation
}

// SegmentID is the segment the request commits to.
func (r Request) SegmentID() int64 { return r.req.GetSegmentId() }

// NewRequest checks a single-segment commit and returns it as a Request.
// The error (wrapping commands.ErrInvalid) names what is wrong.
func NewRequest(req *coordpb.CommitSegmentManifestRequest) (Request, error) {
	return newRequest(req, false)
}

// Batch is a checked batch commit (docs/semantics.md#manifest-batches),
// built by NewBatch: at most commands.MaxManifestPublishes distinct
// segments, each a checked member without a request ID of its own.
type Batch struct {
	members   []Request
	requestID string
}

// Len is the number of segments the batch commits.
func (b Batch) Len() int { return len(b.members) }

// NewBatch checks a batch commit and returns it as a Batch. A batch of one
// follows the single-segment rules; a larger one adds the batch rules (no
// new segment, no SegmentIndex change).
func NewBatch(req *coordpb.CommitSegmentManifestBatchRequest) (Batch, error) {
	n := len(req.GetCommits())
	if n == 0 {
		return Batch{}, nil // nothing to publish: a no-op
	}
	if n > commands.MaxManifestPublishes {
		return Batch{}, invalidf("a batch commits at most %d segments, got %d", commands.MaxManifestPublishes, n)
	}
	if err := vocab.ValidateRequestID(req.GetRequestId()); err != nil {
		return Batch{}, vocab.Errorf(commands.ErrInvalid, "%w", err) // the one request-ID check
	}
	b := Batch{members: make([]Request, n), requestID: req.GetRequestId()}
	ids := make([]int64, n)
	for i, m := range req.GetCommits() {
		r, err := newRequest(m, n > 1)
		if err != nil {
			return Batch{}, err
		}
		if m.RequestId != "" {
			return Batch{}, invalidf("segment %d: members of a batch carry no request_id (the batch has one)", m.SegmentId)
		}
		b.members[i], ids[i] = r, m.SegmentId
	}
	slices.Sort(ids)
	if len(slices.Compact(ids)) != n {
		return Batch{}, invalidf("a batch names a segment twice")
	}
	return b, nil
}

// newRequest checks req's shape before anything is read or written, then
// converts its catalog mutation and checks it as the log will; inBatch
// adds the batch rules.
func newRequest(req *coordpb.CommitSegmentManifestRequest, inBatch bool) (Request, error) {
	if err := checkShape(req, inBatch); err != nil {
		return Request{}, err
	}
	cat, err := catalogOf(req.SegmentId, req.Catalog)
	if err != nil {
		return Request{}, err
	}
	if err := commands.ValidateManifestCatalog(req.SegmentId, cat); err != nil {
		return Request{}, err
	}
	return Request{req: req, catalog: cat}, nil
}

// checkShape applies the request rules of the commit framework to req.
func checkShape(req *coordpb.CommitSegmentManifestRequest, inBatch bool) error {
	if req == nil || req.SegmentId <= 0 {
		return invalidf("a commit needs a positive segment_id")
	}
	if req.Mutation == nil || req.Mutation.Kind == nil {
		return invalidf("segment %d: a commit needs a mutation", req.SegmentId)
	}
	prep := req.Mutation.GetPublishPrepared()
	if req.ExpectedVersion != nil && prep == nil {
		return invalidf("segment %d: expected_version is allowed only with publish_prepared", req.SegmentId)
	}
	if prep != nil {
		if prep.Version < 1 {
			return invalidf("segment %d: a prepared revision has a version of at least 1", req.SegmentId)
		}
		if prep.BasePath != "" {
			if err := commands.ValidateManifestBase(prep.BasePath); err != nil {
				return err
			}
		}
	}
	if err := vocab.ValidateRequestID(req.RequestId); err != nil {
		return vocab.Errorf(commands.ErrInvalid, "%w", err) // the one request-ID check
	}
	cat := req.Catalog
	if inBatch {
		if cat.GetNewSegment() != nil {
			return invalidf("segment %d: a batch commit cannot create segments", req.SegmentId)
		}
		if len(cat.GetIndexUpserts()) > 0 || len(cat.GetIndexRemoves()) > 0 {
			return invalidf("segment %d: a batch commit cannot change SegmentIndex records", req.SegmentId)
		}
		if req.Mutation.GetAddIndexes() != nil {
			return invalidf("segment %d: a batch commit cannot add index entries", req.SegmentId)
		}
	}
	if len(cat.GetIndexUpserts()) > 0 && len(cat.GetIndexRemoves()) > 0 {
		return invalidf("segment %d: one commit either upserts or removes SegmentIndex records, not both", req.SegmentId)
	}
	if len(cat.GetIndexUpserts()) > 1 {
		return invalidf("segment %d: at most one SegmentIndex upsert per commit, got %d", req.SegmentId, len(cat.GetIndexUpserts()))
	}
	if cat.GetNewSegment() != nil && prep != nil && req.ExpectedVersion != nil {
		return invalidf("segment %d: a new segment has no expected manifest", req.SegmentId)
	}
	return checkIndexStaging(req)
}

// checkIndexStaging: every SegmentIndex upsert is added by the mutation's
// AddIndexes with the same build, index and field; every removal is
// retracted by its DropIndexes.
func checkIndexStaging(req *coordpb.CommitSegmentManifestRequest) error {
	cat := req.Catalog
	for _, up := range cat.GetIndexUpserts() {
		found := false
		for _, ix := range req.Mutation.GetAddIndexes().GetIndexes() {
			if ix.BuildId == up.BuildId {
				found = ix.IndexId == up.IndexId && ix.FieldId == up.FieldId
			}
		}
		if !found {
			return invalidf("segment %d: SegmentIndex upsert of build %d has no matching AddIndexes entry", req.SegmentId, up.BuildId)
		}
	}
	for _, rm := range cat.GetIndexRemoves() {
		drop := req.Mutation.GetDropIndexes()
		found := false
		for _, b := range drop.GetBuildIds() {
			found = found || b == rm
		}
		if !found {
			return invalidf("segment %d: SegmentIndex removal of build %d has no matching DropIndexes retraction", req.SegmentId, rm)
		}
	}
	return nil
}
