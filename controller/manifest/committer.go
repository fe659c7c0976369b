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
	tails  *tailTable
	reqs   *requestGate
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
	return &Committer{leader: leader, cfg: cfg, clock: cfg.Clock, locks: newSegmentLocks(), tails: newTailTable(), reqs: newRequestGate(), log: log}
}

// Store is the object store revisions are written to (nil: none).
func (c *Committer) Store() objectstore.Store { return c.cfg.Store }

// Commit runs one single-segment commit (docs/semantics.md#manifest-commit):
// lock the segment, read its pointer (or its pending tail,
// docs/semantics.md#manifest-pipelining), write the next revision, propose
// the publication with the term the decision was made in, release the
// lock once the proposal is queued, and map Apply's answer to the error
// classes. An attempt built on a tail that Apply refuses because the base
// moved (the predecessor did not apply) is retried from the applied
// state, at most maxAttempts in all. r was checked by NewRequest; only a
// zero Request is refused here.
func (c *Committer) Commit(ctx context.Context, r Request) (resp *coordpb.CommitSegmentManifestResponse, err error) {
	defer func() { c.cfg.Metrics.outcome(err) }()
	if r.req == nil {
		return nil, errUnchecked
	}
	if c.cfg.Store == nil {
		return nil, ErrNoStore
	}
	leave, err := c.reqs.enter(ctx, r.req.RequestId)
	if err != nil {
		return nil, err
	}
	defer leave()
	for attempt := 1; ; attempt++ {
		out, retry, err := c.commitOnce(ctx, r, attempt)
		if retry == "" || attempt == maxAttempts {
			return out, err
		}
		c.cfg.Metrics.retried(retry)
	}
}

// commitOnce is one attempt of Commit; retry names why Apply refused an
// attempt built on a tail ("" when it is not to be retried).
func (c *Committer) commitOnce(ctx context.Context, r Request, attempt int) (*coordpb.CommitSegmentManifestResponse, string, error) {
	req := r.req
	start := c.clock.Now()
	if err := c.locks.lock(ctx, req.SegmentId); err != nil {
		return nil, "", fmt.Errorf("wait for the lock of segment %d: %w", req.SegmentId, err)
	}
	c.cfg.Metrics.lockWait(c.clock.Since(start))
	rel := c.holding(func() { c.locks.unlock(req.SegmentId) })
	defer rel.release(nil)
	term := c.leader.EstablishedTerm()
	if term == 0 {
		return nil, "", leadership.ErrNotEstablished
	}
	if out, ok := c.recorded(req.RequestId); ok {
		return out[0], "", nil // a retry of a commit that is already applied
	}
	st, bs := c.bases([]int64{req.SegmentId}, term)
	m := &member{id: req.SegmentId, b: bs[0]}
	pub, nt, skipped, err := c.prepare(ctx, st, r, false, m.b)
	if err != nil {
		return nil, "", err
	}
	if skipped != nil {
		return skipped, "", nil
	}
	m.pub, m.nt = pub, nt
	c.pauseForTest(ctx)
	out, retry, err := c.proposeMembers(ctx, term, req.RequestId, attempt, []*member{m}, rel)
	if err != nil {
		return nil, retry, err
	}
	return out[0], "", nil
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

// propose commits the publications as one command decided in term, under
// request ID attemptID (requestID for a first attempt), calling onQueued
// once it has its place in log order (commands.OnQueued). rej is
// Apply's refusal of this very command (nil: none).
func (c *Committer) propose(ctx context.Context, term uint64, requestID, attemptID string, pubs []*logpb.ManifestPublish,
	onQueued func()) ([]*coordpb.CommitSegmentManifestResponse, *commands.RejectedError, error) {
	cmd, err := commands.New(&logpb.CommitSegmentManifests{Publishes: pubs}, attemptID)
	if err != nil {
		return nil, nil, err
	}
	res, err := commands.Commit(ctx, c.leader, cmd.DecidedIn(term), commands.OnQueued(onQueued))
	var rej *commands.RejectedError
	if !errors.As(err, &rej) {
		rej = nil
	} else if requestID != "" {
		// An earlier attempt with this request ID may have committed
		// while this one was being prepared (its caller gave up waiting):
		// the first result recorded for the ID is the answer.
		if out, ok := c.recorded(requestID); ok {
			return out, rej, nil
		}
	}
	if err != nil {
		err = staleOf(err)
		var stale *StaleError
		if errors.As(err, &stale) {
			c.cfg.Metrics.staleRejection()
		}
		return nil, rej, err
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
	return out, nil, nil
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
// (the FSM's dedup table), with the published versions and base paths. The
// IDs of the transparent retries of the request (attemptRequestID) are
// looked up too: a commit answered by a retry is as done as one answered
// by its first attempt.
func (c *Committer) recorded(requestID string) ([]*coordpb.CommitSegmentManifestResponse, bool) {
	if requestID == "" {
		return nil, false
	}
	st := c.leader.State()
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		res, ok := st.LookupRequest(attemptRequestID(requestID, attempt))
		if !ok || res.Rejection != nil || res.GetManifestCommit() == nil {
			continue
		}
		var out []*coordpb.CommitSegmentManifestResponse
		for _, p := range res.GetManifestCommit().GetPublished() {
			r := &coordpb.CommitSegmentManifestResponse{SegmentId: p.SegmentId, Version: p.Version, Skipped: p.Skipped}
			if ptr, _, err := st.ManifestPointer(p.SegmentId); err == nil && !p.Skipped {
				r.BasePath = ptr.Base
			}
			out = append(out, r)
		}
		if len(out) > 0 {
			return out, true
		}
	}
	return nil, false
}
