package manifest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/objectstore"
)

// GCReport is what one orphan collection pass found.
type GCReport struct {
	// Found: orphans past the grace period; Removed: those deleted.
	Found, Removed []string
	// Young: orphans still inside the grace period (kept).
	Young int
}

// basePlan is one base path's share of a pass.
type basePlan struct {
	base string
	use  fsm.ManifestBaseUse
	// retired: revisions a committed retirement already condemned (a
	// pass that stopped before deleting them); deleted without a command.
	retired []string
	// cands: old orphans from..through, to be retired and then deleted.
	cands         []string
	from, through int64
	locks         []int64
}

// CollectOrphans runs one pass (docs/semantics.md#manifest-orphans). It
// lists every revision under commands.ManifestRoot and groups them by
// base path. A base is attributed by the replicated state, never by the
// segment ID in its path (fsm.State.ManifestBaseUse): the segments whose
// own base it is, and the highest version any of them publishes there.
// Candidates are the versions above that one (all of a base nobody
// publishes), older than the grace period, up to the first young one.
//
// Nothing is deleted before it is unpublishable: the pass first commits a
// RetireManifestRevisions, decided in this leader's term, naming per base
// the versions from..through it condemns. Apply refuses an entry whose
// base gained a publication at or above `from` (or whose Importing
// segment may still publish), and refuses the whole command once a newer
// leader is established; from then on every publication path refuses a
// condemned version. Only the entries the result lists as retired are
// deleted. So a delayed inline publication, one applied during the pass,
// or a deposed leader's late pass can never leave a pointer naming a
// missing object. Nothing at or below a published version is ever
// deleted. Segments whose lock a commit of this leader holds, or whose
// publication is in flight, are left for the next pass (so its own
// commits in flight are not made stale).
func (c *Committer) CollectOrphans(ctx context.Context, dryRun bool) (GCReport, error) {
	return c.collectOrphans(ctx, dryRun, c.leader)
}

// collectOrphans is CollectOrphans proposing its retirements through p
// (the leader routine's proposer, or the leader).
func (c *Committer) collectOrphans(ctx context.Context, dryRun bool, p commands.Proposer) (GCReport, error) {
	var rep GCReport
	if c.cfg.Store == nil {
		return rep, ErrNoStore
	}
	term := c.leader.EstablishedTerm()
	if term == 0 {
		return rep, leadership.ErrNotEstablished
	}
	objs, err := c.cfg.Store.ListInfo(ctx, commands.ManifestRoot)
	if err != nil {
		return rep, fmt.Errorf("list manifest revisions: %w", err)
	}
	plans := c.planPass(objs, &rep)
	defer func() { c.cfg.Metrics.orphans(len(rep.Found), len(rep.Removed)) }()
	for _, p := range plans {
		rep.Found = append(rep.Found, p.retired...)
		rep.Found = append(rep.Found, p.cands...)
	}
	if dryRun {
		return rep, nil
	}
	// Already condemned: safe to delete whatever else happens.
	for _, p := range plans {
		if err := c.deleteAll(ctx, p.retired, &rep); err != nil {
			return rep, err
		}
	}
	var todo []*basePlan
	for i := range plans {
		if len(plans[i].cands) > 0 && c.lockPlan(&plans[i]) {
			todo = append(todo, &plans[i])
		}
	}
	locked := slices.Clone(todo)
	defer func() {
		for _, p := range locked {
			c.locks.unlockMany(p.locks)
		}
	}()
	for len(todo) > 0 {
		n := min(len(todo), commands.MaxManifestRetirements)
		chunk := todo[:n]
		retired, err := c.retire(ctx, p, term, chunk)
		if err != nil {
			return rep, err
		}
		for i, p := range chunk {
			if !retired[i] {
				continue // kept: a publication overtook the pass
			}
			if err := c.deleteAll(ctx, p.cands, &rep); err != nil {
				return rep, err
			}
		}
		todo = todo[n:]
	}
	return rep, nil
}

// planPass groups the listing by base and picks each base's candidates
// against the current state.
func (c *Committer) planPass(objs []objectstore.ObjectInfo, rep *GCReport) []basePlan {
	type rev struct {
		key     string
		version int64
		mod     time.Time
	}
	byBase := map[string][]rev{}
	for _, o := range objs {
		base, v, ok := commands.ParseManifestKey(o.Key)
		if !ok {
			continue
		}
		byBase[base] = append(byBase[base], rev{o.Key, v, o.ModTime})
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	st := c.leader.State()
	now := c.clock.Now()
	var plans []basePlan
	for _, base := range bases {
		use := st.ManifestBaseUse(base)
		if use.Importing {
			continue // the import job is still writing them
		}
		revs := byBase[base]
		slices.SortFunc(revs, func(a, b rev) int { return cmp.Compare(a.version, b.version) })
		p := basePlan{base: base, use: use, from: use.Published + 1}
		blocked := false
		for _, r := range revs {
			switch {
			case r.version <= use.Published:
			case r.version <= use.Retired:
				p.retired = append(p.retired, r.key)
			case now.Sub(r.mod) < c.cfg.GCGrace:
				rep.Young++
				blocked = true // retiring above it would retire it too
			case !blocked:
				p.cands = append(p.cands, r.key)
				p.through = r.version
			}
		}
		if len(p.retired) > 0 || len(p.cands) > 0 {
			plans = append(plans, p)
		}
	}
	return plans
}

// lockPlan takes the locks of every segment that may publish at the base
// (for a base nobody publishes, the segment its path names), or none.
func (c *Committer) lockPlan(p *basePlan) bool {
	ids := slices.Clone(p.use.Segments)
	if len(ids) == 0 {
		if seg, ok := commands.SegmentOfManifestBase(p.base); ok {
			ids = []int64{seg}
		}
	}
	slices.Sort(ids)
	if !c.locks.tryLockMany(ids) {
		return false // a commit is being prepared: next pass
	}
	// The locks are released once a publication is queued
	// (docs/semantics.md#manifest-pipelining); one still in flight may
	// publish a revision this pass would condemn (Apply would keep the
	// base, since the retirement is queued after it; waiting costs nothing).
	for _, id := range ids {
		if c.tails.inFlight(id) {
			c.locks.unlockMany(ids)
			return false
		}
	}
	p.locks = ids
	return true
}

// retire commits one RetireManifestRevisions for the plans through
// proposer, decided in term, and answers which of them Apply retired.
func (c *Committer) retire(ctx context.Context, proposer commands.Proposer, term uint64, plans []*basePlan) ([]bool, error) {
	body := &logpb.RetireManifestRevisions{}
	for _, p := range plans {
		body.Retirements = append(body.Retirements, &logpb.ManifestRetirement{Base: p.base, From: p.from, Through: p.through})
	}
	cmd, err := commands.New(body, "")
	if err != nil {
		return nil, err
	}
	res, err := commands.Commit(ctx, proposer, cmd.DecidedIn(term))
	if err != nil {
		return nil, fmt.Errorf("commit the retirement of %d manifest bases: %w", len(plans), err)
	}
	out := res.GetManifestRetired().GetRetired()
	if len(out) != len(plans) {
		return nil, fmt.Errorf("retirement answered %d of %d bases", len(out), len(plans))
	}
	for i, ok := range out {
		if !ok {
			c.log.Debug("manifest base kept by the state machine", "base", plans[i].base, "why", res.GetManifestRetired().GetReasons()[i])
		}
	}
	return out, nil
}

func (c *Committer) deleteAll(ctx context.Context, keys []string, rep *GCReport) error {
	for _, k := range keys {
		if err := c.cfg.Store.Delete(ctx, k); err != nil && !errors.Is(err, objectstore.ErrNotFound) {
			return fmt.Errorf("delete orphan %s: %w", k, err)
		}
		rep.Removed = append(rep.Removed, k)
	}
	return nil
}

// RunGC is the collector's leader routine: one pass every GCInterval until
// ctx ends, proposing through the routine's proposer p.
func (c *Committer) RunGC(ctx context.Context, term uint64, p commands.Proposer) {
	if c.cfg.Store == nil {
		return
	}
	t := c.clock.NewTicker(c.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		rep, err := c.collectOrphans(ctx, false, p)
		if err != nil && ctx.Err() == nil {
			c.log.Warn("manifest orphan collection failed", "term", term, "error", err)
		} else if len(rep.Removed) > 0 {
			c.log.Info("manifest orphans removed", "term", term, "removed", len(rep.Removed), "young", rep.Young)
		}
	}
}
