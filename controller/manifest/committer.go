package manifest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/vocab"
)

// Leader is what the committer needs from the raft node; raftnode.Node
// implements it.
type Leader interface {
	// State is the newest state applied on this node: immutable, never nil,
	// possibly behind the leader. The publication guards run again inside
	// Apply, so a check read from it may be stale but never unsafe.
	State() *fsm.State
	// EstablishedTerm is the term this node leads in once LeaderEstablished
	// is applied for it, or 0; it may drop to 0 at any moment (a hint, not
	// a lease: docs/architecture.md#leader-routines).
	EstablishedTerm() uint64
	// Propose commits a command; the error contract is commands.Proposer's.
	commands.Proposer
}

// Config configures the committer and the orphan collector.
type Config struct {
	// Store holds the revisions (the binlogs' store). Nil disables
	// manifest commits (ErrNoStore).
	Store objectstore.Store
	// Clock drives lock backoff and the collector (nil: the real clock).
	Clock clockwork.Clock
	// Escalation is when a batch stops retrying all-or-nothing lock
	// attempts and blocks in order (0: LockEscalationPeriod).
	Escalation time.Duration
	// Pool bounds the revisions one batch prepares at once (0: 16).
	Pool int
	// GCInterval and GCGrace drive the orphan collector (0: 1 min and
	// 10 min): an orphan is deleted once it is older than GCGrace.
	GCInterval, GCGrace time.Duration
	Metrics             *Metrics
	Logger              hclog.Logger
	// TestOnlyPauseAfterWrite waits this long between writing a revision
	// and proposing its publication, so a test can kill the leader there.
	TestOnlyPauseAfterWrite time.Duration
}

// Committer serialises manifest commits per segment on the leader.
type Committer struct {
	leader Leader
	cfg    Config
	clock  clockwork.Clock
	locks  *segmentLocks
	log    hclog.Logger
}

// New builds a committer.
func New(leader Leader, cfg Config) *Committer {
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Escalation <= 0 {
		cfg.Escalation = LockEscalationPeriod
	}
	if cfg.Pool <= 0 {
		cfg.Pool = 16
	}
	if cfg.GCInterval <= 0 {
		cfg.GCInterval = time.Minute
	}
	if cfg.GCGrace <= 0 {
		cfg.GCGrace = 10 * time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Committer{leader: leader, cfg: cfg, clock: cfg.Clock, locks: newSegmentLocks(), log: log}
}

// Store is the object store revisions are written to (nil: none).
func (c *Committer) Store() objectstore.Store { return c.cfg.Store }

// Commit runs one single-segment commit (docs/semantics.md#manifest-commit):
// lock the segment, read its pointer, write the next revision, propose the
// publication with the term the decision was made in, and map Apply's
// answer to the error classes.
func (c *Committer) Commit(ctx context.Context, req *coordpb.CommitSegmentManifestRequest) (resp *coordpb.CommitSegmentManifestResponse, err error) {
	defer func() { c.cfg.Metrics.outcome(err) }()
	if err := ValidateRequest(req, false); err != nil {
		return nil, err
	}
	if c.cfg.Store == nil {
		return nil, ErrNoStore
	}
	start := c.clock.Now()
	if err := c.locks.lock(ctx, req.SegmentId); err != nil {
		return nil, fmt.Errorf("wait for the lock of segment %d: %w", req.SegmentId, err)
	}
	c.cfg.Metrics.lockWait(c.clock.Since(start))
	held := c.clock.Now()
	defer func() {
		c.locks.unlock(req.SegmentId)
		c.cfg.Metrics.lockHold(c.clock.Since(held))
	}()
	term := c.leader.EstablishedTerm()
	if term == 0 {
		return nil, leadership.ErrNotEstablished
	}
	if out, ok := c.recorded(req.RequestId); ok {
		return out[0], nil // a retry of a commit that is already applied
	}
	pub, skipped, err := c.prepare(ctx, c.leader.State(), req, false)
	if err != nil {
		return nil, err
	}
	if skipped != nil {
		return skipped, nil
	}
	c.pauseForTest(ctx)
	out, err := c.propose(ctx, term, req.RequestId, []*logpb.ManifestPublish{pub})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

func (c *Committer) pauseForTest(ctx context.Context) {
	if c.cfg.TestOnlyPauseAfterWrite <= 0 {
		return
	}
	select {
	case <-ctx.Done():
	case <-c.clock.After(c.cfg.TestOnlyPauseAfterWrite):
	}
}

// propose commits the publications as one command decided in term.
func (c *Committer) propose(ctx context.Context, term uint64, requestID string, pubs []*logpb.ManifestPublish) ([]*coordpb.CommitSegmentManifestResponse, error) {
	cmd, err := commands.New(&logpb.CommitSegmentManifests{Publishes: pubs}, requestID)
	if err != nil {
		return nil, err
	}
	res, err := c.leader.Propose(ctx, cmd.DecidedIn(term))
	if err != nil {
		return nil, err
	}
	if res.Rejection != nil && requestID != "" {
		// An earlier attempt with this request ID may have committed
		// while this one was being prepared (its caller gave up waiting):
		// the first result recorded for the ID is the answer.
		if out, ok := c.recorded(requestID); ok {
			return out, nil
		}
	}
	if res.Rejection != nil {
		err := rejectionError(res.Rejection)
		var stale *StaleError
		if errors.As(err, &stale) {
			c.cfg.Metrics.staleRejection()
		}
		return nil, err
	}
	c.deleteSkipped(ctx, pubs)
	out := make([]*coordpb.CommitSegmentManifestResponse, 0, len(pubs))
	for i, p := range res.GetManifestCommit().GetPublished() {
		next, _ := commands.ParseManifestPointer(pubs[i].Next)
		r := &coordpb.CommitSegmentManifestResponse{SegmentId: p.SegmentId, Version: p.Version, Skipped: p.Skipped}
		if !p.Skipped {
			r.BasePath = next.Base
		}
		out = append(out, r)
	}
	return out, nil
}

// deleteSkipped removes the versions a successful structured publication
// stepped over (taken by orphans of a crashed or deposed leader). They can
// never be referenced: the pointer went from base straight to next, and a
// pointer never goes back. Without this they would sit below the pointer,
// where the collector does not look. Best effort (the lock is still held).
func (c *Committer) deleteSkipped(ctx context.Context, pubs []*logpb.ManifestPublish) {
	for _, p := range pubs {
		if p.Prepared {
			continue
		}
		base, _ := commands.ParseManifestPointer(p.Base)
		next, _ := commands.ParseManifestPointer(p.Next)
		for v := base.Version + 1; v < next.Version; v++ {
			key := commands.ManifestKey(next.Base, v)
			if err := c.cfg.Store.Delete(ctx, key); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
				c.log.Warn("could not delete a skipped manifest revision; it stays an orphan", "key", key, "error", err)
			} else if err == nil {
				c.cfg.Metrics.orphans(1, 1)
			}
		}
	}
}

// recorded answers a request ID whose first command committed successfully
// (the FSM's dedup table), with the published versions and base paths.
func (c *Committer) recorded(requestID string) ([]*coordpb.CommitSegmentManifestResponse, bool) {
	if requestID == "" {
		return nil, false
	}
	st := c.leader.State()
	res, ok := st.LookupRequest(requestID)
	if !ok || res.Rejection != nil || res.GetManifestCommit() == nil {
		return nil, false
	}
	var out []*coordpb.CommitSegmentManifestResponse
	for _, p := range res.GetManifestCommit().GetPublished() {
		r := &coordpb.CommitSegmentManifestResponse{SegmentId: p.SegmentId, Version: p.Version, Skipped: p.Skipped}
		if ptr, _, err := st.ManifestPointer(p.SegmentId); err == nil && !p.Skipped {
			r.BasePath = ptr.Base
		}
		out = append(out, r)
	}
	return out, len(out) > 0
}

// ValidateRequest checks a commit's shape before anything is read or
// written; inBatch adds the batch rules.
func ValidateRequest(req *coordpb.CommitSegmentManifestRequest, inBatch bool) error {
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
		return fmt.Errorf("%w: %w", ErrInvalid, err) // the one request-ID check
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
	if err := validateIndexStaging(req); err != nil {
		return err
	}
	return validateCatalogShape(req)
}

// validateCatalogShape runs the log's shape check on the converted
// catalog mutation, so a bad field is refused before any I/O.
func validateCatalogShape(req *coordpb.CommitSegmentManifestRequest) error {
	cat, err := catalogOf(req.SegmentId, req.Catalog)
	if err != nil {
		return err
	}
	next := commands.ManifestPointer{Base: "manifest/x", Version: 1}
	return commands.ValidateManifestPublish(&logpb.ManifestPublish{SegmentId: req.SegmentId, Next: next.String(), Catalog: cat})
}

// validateIndexStaging: every SegmentIndex upsert is added by the
// mutation's AddIndexes with the same build, index and field; every
// removal is retracted by its DropIndexes.
func validateIndexStaging(req *coordpb.CommitSegmentManifestRequest) error {
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
