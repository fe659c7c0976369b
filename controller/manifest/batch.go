package manifest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
)

// CommitBatch commits many segments in one command
// (docs/semantics.md#manifest-batches): every member's lock is taken
// (all-or-nothing attempts, then ordered blocking), every revision is
// written (in parallel, at most Config.Pool at once), and one command
// publishes them all or none. Dropped members are skipped; any other
// refusal, I/O error or stale base aborts the whole batch, and the
// revisions written for it become orphans. b was checked by NewBatch.
func (c *Committer) CommitBatch(ctx context.Context, b Batch) (out []*coordpb.CommitSegmentManifestResponse, err error) {
	defer func() { c.cfg.Metrics.outcome(err) }()
	reqs, requestID := b.members, b.requestID
	if len(reqs) == 0 {
		return nil, nil // nothing to publish: a no-op
	}
	sorted := make([]int64, len(reqs))
	for i, r := range reqs {
		sorted[i] = r.SegmentID()
	}
	slices.Sort(sorted)
	if c.cfg.Store == nil {
		return nil, ErrNoStore
	}
	waited, err := c.locks.lockMany(ctx, c.clock, sorted, c.cfg.Escalation)
	c.cfg.Metrics.lockWait(waited)
	if err != nil {
		return nil, fmt.Errorf("wait for the locks of %d segments: %w", len(sorted), err)
	}
	held := c.clock.Now()
	defer func() {
		c.locks.unlockMany(sorted)
		c.cfg.Metrics.lockHold(c.clock.Since(held))
	}()
	term := c.leader.EstablishedTerm()
	if term == 0 {
		return nil, leadership.ErrNotEstablished
	}
	if out, ok := c.recorded(requestID); ok {
		return out, nil // a retry of a batch that is already applied
	}
	pubs, answers, err := c.prepareAll(ctx, reqs)
	if err != nil {
		return nil, err
	}
	var live []*logpb.ManifestPublish
	for _, p := range pubs {
		if p != nil {
			live = append(live, p)
		}
	}
	if len(live) > 0 {
		c.pauseForTest(ctx)
		published, err := c.propose(ctx, term, requestID, live)
		if err != nil {
			return nil, err
		}
		j := 0
		for i := range answers {
			if pubs[i] != nil {
				answers[i] = published[j]
				j++
			}
		}
	}
	return answers, nil
}

// prepareAll prepares every member against one snapshot, at most Pool at
// once; the first error cancels the rest and aborts the batch.
func (c *Committer) prepareAll(ctx context.Context, reqs []Request) ([]*logpb.ManifestPublish, []*coordpb.CommitSegmentManifestResponse, error) {
	st := c.leader.State()
	pubs := make([]*logpb.ManifestPublish, len(reqs))
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
			pub, skipped, err := c.prepare(ctx, st, r, len(reqs) > 1)
			if err != nil {
				once.Do(func() { first = err; cancel() })
				return
			}
			pubs[i], answers[i] = pub, skipped
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	if first != nil {
		return nil, nil, first
	}
	return pubs, answers, nil
}
