package flush

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/pacing"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Run is the leader routine: a seal/flush round every Interval and after
// every time-tick report that may make a segment flushable, until ctx
// ends, proposing through the routine's proposer p (every command is a
// decision of term, Command.DecidedIn); paced so rounds take at most
// about a tenth of a core
// (package pacing).
func (m *Manager) Run(ctx context.Context, term uint64, p commands.Proposer) {
	t := m.clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	var pace pacing.Pacer
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		case <-m.kick:
		}
		if d := pace.Wait(m.clock.Now()); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-m.clock.After(d):
			}
		}
		start := m.clock.Now()
		_, _ = m.round(ctx, term, p)
		pace.Ran(start, m.clock.Now())
	}
}

// RoundResult says what one round proposed.
type RoundResult struct {
	Sealed   []Decision
	Flushing []int64
	// Pruned: Dropped segments forgotten after their retention.
	Pruned []int64
	// PrunedVChannels: dropped VChannels forgotten after the same
	// retention, once none of their segments was left.
	PrunedVChannels []string
}

// Round runs one seal and flush check in term: it seals what the policy
// decides (one SealSegments per reason, at a fresh TSO timestamp), marks
// Flushing every sealed segment whose VChannel's time tick has passed its
// seal time and whose allocations have expired, and forgets Dropped
// segments past their retention. The new leader seals nothing
// during its first expiry period (it cannot see its predecessor's
// allocations yet).
func (m *Manager) Round(ctx context.Context, term uint64) (RoundResult, error) {
	return m.round(ctx, term, m.l)
}

// round is Round proposing through p (the leader routine's proposer, or
// the leader).
func (m *Manager) round(ctx context.Context, term uint64, p commands.Proposer) (RoundResult, error) {
	var res RoundResult
	m.mu.Lock()
	cur, err := m.termLocked()
	termStart := m.termStart
	m.mu.Unlock()
	if err != nil || cur != term {
		return res, ErrNotLeader
	}
	now := m.clock.Now()
	st := m.l.State()
	growing, sealed := m.views(st, now, termStart)
	if !now.Before(termStart.Add(m.cfg.AllocationExpiry)) {
		res.Sealed = Decide(growing, now, m.cfg)
		if err := m.seal(ctx, term, p, res.Sealed); err != nil {
			return res, err
		}
	}
	for _, v := range sealed {
		if Flushable(v, now) {
			res.Flushing = append(res.Flushing, v.ID)
		}
	}
	if len(res.Flushing) > 0 {
		if err := m.propose(ctx, term, p, &logpb.MarkSegmentsFlushing{SegmentIds: res.Flushing, DecisionTerm: term}); err != nil {
			return res, err
		}
	}
	// Propose a prune only when Apply would forget something: a Dropped
	// segment past its retention whose VChannel's checkpoint has passed it
	// (fsm.State.PrunableDropped), so a stuck checkpoint costs no log
	// entry per round.
	if len(st.PrunableDropped(now.Add(-m.cfg.DroppedRetention).UnixMilli(), 1)) > 0 {
		pruned, err := m.prune(ctx, term, p)
		res.Pruned = pruned
		if err != nil {
			return res, err
		}
	}
	// Then the dropped VChannels left with no segment, after the same
	// retention (fsm.State.PrunableDroppedVChannels): without this every
	// collection ever dropped would keep a record.
	if len(st.PrunableDroppedVChannels(now.Add(-m.cfg.DroppedRetention).UnixMilli(), 1)) > 0 {
		forgot, err := m.pruneVChannels(ctx, term, p)
		res.PrunedVChannels = forgot
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// pruneVChannels forgets the oldest dropped VChannels past their
// retention, proposed through p.
func (m *Manager) pruneVChannels(ctx context.Context, term uint64, p commands.Proposer) ([]string, error) {
	res, err := m.decide(ctx, term, p, &logpb.PruneDroppedVChannels{
		RetentionMs: m.cfg.DroppedRetention.Milliseconds(), MaxCount: PruneVChannelBatch, DecisionTerm: term})
	return res.GetVchannels().GetVchannels(), err
}

// prune forgets the oldest Dropped segments past their retention,
// proposed through p.
func (m *Manager) prune(ctx context.Context, term uint64, p commands.Proposer) ([]int64, error) {
	res, err := m.decide(ctx, term, p, &logpb.PruneDroppedSegments{
		RetentionMs: m.cfg.DroppedRetention.Milliseconds(), MaxCount: PruneBatch, DecisionTerm: term})
	return res.GetSegments().GetIds(), err
}

// views reads the active segments of st with this term's memory. The state
// is read before the memory (see assignOne).
func (m *Manager) views(st *fsm.State, now, termStart time.Time) ([]GrowingView, []FlushView) {
	var growing []GrowingView
	var sealed []FlushView
	m.mu.Lock()
	defer m.mu.Unlock()
	// Forget the memory of segments that left the pipeline (sealed
	// segments keep theirs until they are flushed: it holds their expiry).
	for id := range m.segs {
		if g, ok := st.Segment(id); !ok || (g.State != logpb.SegmentState_SEGMENT_GROWING && g.State != logpb.SegmentState_SEGMENT_SEALED) {
			delete(m.segs, id)
		}
	}
	inheritedExpire := termStart.Add(m.cfg.AllocationExpiry)
	inheritedTs := fsm.ComposeTS(inheritedExpire.UnixMilli() + 1)
	st.EachActiveSegment(func(g *fsm.Segment) bool {
		mem := m.segs[g.ID]
		switch g.State {
		case logpb.SegmentState_SEGMENT_GROWING:
			v := GrowingView{ID: g.ID, VChannel: g.VChannel, Bytes: g.Size, Capacity: m.cfg.Capacity(g.ID),
				Created: time.UnixMilli(g.CreatedMs), LastWrite: time.UnixMilli(g.LastWriteMs), BinlogFiles: g.BinlogFileCount()}
			if mem != nil {
				v.Bytes = max(v.Bytes, int64(mem.bytes))
				if mem.lastAlloc.After(v.LastWrite) {
					v.LastWrite = mem.lastAlloc
				}
			}
			growing = append(growing, v)
		case logpb.SegmentState_SEGMENT_SEALED:
			v := FlushView{ID: g.ID, SealTs: g.SealTs, ExpireTs: inheritedTs, Expire: inheritedExpire}
			if mem != nil && mem.expire.After(v.Expire) {
				v.Expire, v.ExpireTs = mem.expire, mem.expireTs
			}
			// Only the current owner's tick counts: a deposed owner's
			// consumption was lost with its buffers.
			if t, ok := m.ticks[g.VChannel]; ok {
				if p, ok := st.PChannel(vocab.PChannelOf(g.VChannel)); ok && p.Term == t.PChannelTerm {
					v.Tick = t.Tick
				}
			}
			sealed = append(sealed, v)
		}
		return true
	})
	return growing, sealed
}

// seal proposes, through p, one SealSegments per reason at a fresh TSO
// timestamp.
func (m *Manager) seal(ctx context.Context, term uint64, p commands.Proposer, ds []Decision) error {
	if len(ds) == 0 {
		return nil
	}
	byReason := map[logpb.SealReason][]int64{}
	var order []logpb.SealReason
	for _, d := range ds {
		if _, ok := byReason[d.Reason]; !ok {
			order = append(order, d.Reason)
		}
		byReason[d.Reason] = append(byReason[d.Reason], d.ID)
	}
	for _, r := range order {
		ts, err := m.tso.AllocVia(ctx, 1, p)
		if err != nil {
			return fmt.Errorf("seal time: %w", err)
		}
		ids := byReason[r]
		for len(ids) > 0 {
			n := min(len(ids), commands.MaxSegmentsPerCmd)
			if err := m.propose(ctx, term, p, &logpb.SealSegments{SegmentIds: ids[:n], SealTs: ts, Reason: r, DecisionTerm: term}); err != nil {
				return err
			}
			ids = ids[n:]
		}
	}
	return nil
}

// SealCollection seals every growing segment of a collection at sealTs in
// one command (Flush) and returns the IDs it sealed.
func (m *Manager) SealCollection(ctx context.Context, collection int64, sealTs uint64) ([]int64, error) {
	term := m.l.EstablishedTerm()
	if term == 0 {
		return nil, ErrNotLeader
	}
	c, err := commands.New(&logpb.SealSegments{CollectionId: collection, SealTs: sealTs, Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: term}, "")
	if err != nil {
		return nil, vocab.Errorf(ErrInvalid, "%w", err)
	}
	res, err := commands.Commit(ctx, m.l, c.DecidedIn(term))
	if err != nil {
		return nil, fmt.Errorf("seal collection %d: %w", collection, err)
	}
	return res.GetSegments().GetIds(), nil
}

// propose commits a leader-routine command decided in term through p.
func (m *Manager) propose(ctx context.Context, term uint64, p commands.Proposer, body proto.Message) error {
	_, err := m.decide(ctx, term, p, body)
	return err
}

// decide is propose returning the command's result (nil with the error
// when it was not committed).
func (m *Manager) decide(ctx context.Context, term uint64, p commands.Proposer, body proto.Message) (*logpb.Result, error) {
	c, err := commands.New(body, "")
	if err != nil {
		return nil, vocab.Errorf(ErrInvalid, "%w", err)
	}
	res, err := commands.Commit(ctx, p, c.DecidedIn(term))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.Type, err)
	}
	return res, nil
}
