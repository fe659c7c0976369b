package manifest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
)

// CommitBatch commits many segments in one command
// (docs/semantics.md#manifest-batches): every member's lock is taken
// (all-or-nothing attempts, then ordered blocking), every revision is
// written (in parallel, at most Config.Pool at once), and one command
// publishes them all or none. Members build on their pending tails like
// single commits and leave theirs (docs/semantics.md#manifest-pipelining);
// the locks are released once the command is queued, and an attempt
// built on a tail that did not apply is retried. Dropped members are
// skipped; any other refusal, I/O error or stale base aborts the whole
// batch, and the revisions written for it become orphans. b was checked
// by NewBatch.
func (c *Committer) CommitBatch(ctx context.Context, b Batch) (out []*coordpb.CommitSegmentManifestResponse, err error) {
	defer func() { c.cfg.Metrics.outcome(err) }()
	if len(b.members) == 0 {
		return nil, nil // nothing to publish: a no-op
	}
	if c.cfg.Store == nil {
		return nil, ErrNoStore
	}
	leave, err := c.reqs.enter(ctx, b.requestID)
	if err != nil {
		return nil, err
	}
	defer leave()
	for attempt := 1; ; attempt++ {
		out, retry, err := c.batchOnce(ctx, b, attempt)
		if retry == "" || attempt == maxAttempts {
			return out, err
		}
		c.cfg.Metrics.retried(retry)
	}
}

// batchOnce is one attempt of CommitBatch (retry as for commitOnce).
func (c *Committer) batchOnce(ctx context.Context, b Batch, attempt int) ([]*coordpb.CommitSegmentManifestResponse, string, error) {
	reqs, requestID := b.members, b.requestID
	sorted := make([]int64, len(reqs))
	for i, r := range reqs {
		sorted[i] = r.SegmentID()
	}
	slices.Sort(sorted)
	waited, err := c.locks.lockMany(ctx, c.clock, sorted, c.cfg.Escalation)
	c.cfg.Metrics.lockWait(waited)
	if err != nil {
		return nil, "", fmt.Errorf("wait for the locks of %d segments: %w", len(sorted), err)
	}
	rel := c.holding(func() { c.locks.unlockMany(sorted) })
	defer rel.release(nil)
	term := c.leader.EstablishedTerm()
	if term == 0 {
		return nil, "", leadership.ErrNotEstablished
	}
	if out, ok := c.recorded(requestID); ok {
		return out, "", nil // a retry of a batch that is already applied
	}
	ids := make([]int64, len(reqs))
	for i, r := range reqs {
		ids[i] = r.SegmentID()
	}
	st, bs := c.bases(ids, term)
	ms := make([]*member, len(reqs))
	for i := range reqs {
		ms[i] = &member{id: ids[i], b: bs[i]}
	}
	answers, err := c.prepareAll(ctx, st, reqs, ms)
	if err != nil {
		return nil, "", err
	}
	var live []*member
	for _, m := range ms {
		if m.pub != nil {
			live = append(live, m)
		}
	}
	if len(live) > 0 {
		c.pauseForTest(ctx)
		published, retry, err := c.proposeMembers(ctx, term, requestID, attempt, live, rel)
		if err != nil {
			return nil, retry, err
		}
		j := 0
		for i := range answers {
			if ms[i].pub != nil {
				answers[i] = published[j]
				j++
			}
		}
	}
	return answers, "", nil
}

// prepareAll prepares every member against one snapshot and its basis, at
// most Pool at once, filling in the members' publications and tails; the
// first error cancels the rest and aborts the batch.
func (c *Committer) prepareAll(ctx context.Context, st *fsm.State, reqs []Request, ms []*member) ([]*coordpb.CommitSegmentManifestResponse, error) {
	answers := make([]*coordpb.CommitSegmentManifestResponse, len(reqs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, min(c.cfg.Pool, len(reqs)))
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			pub, nt, skipped, err := c.prepare(ctx, st, r, len(reqs) > 1, ms[i].b)
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			ms[i].pub, ms[i].nt, answers[i] = pub, nt, skipped
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return nil, first
	}
	return answers, nil
}
