package nodehealth

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Lost-WAL detection (docs/architecture.md#lost-wal-detection). A streaming
// node's heartbeat lists the WALs it really has open, with their terms. An
// ASSIGNED PChannel whose owner does not list it at the current term in
// two heartbeats in a row has lost its WAL (a stray Remove, a WAL error the
// node could not report, a bug): the leader marks it UNAVAILABLE at that
// term (MarkPChannelsUnavailable, fenced by the leader's decision term and
// guarded in Apply by the channel still being ASSIGNED at that term), and
// the balancer reassigns it at a new term. One missed heartbeat is
// forgiven: a heartbeat built just before an Assign reached the node can
// arrive after the leader committed the assignment as done. Like every
// heartbeat, the reports stay in leader memory; only the decision goes
// through the log.

// Reasons of coordd_pchannel_lost_wal_total.
const (
	// LostMissing: the owner does not list the PChannel at all.
	LostMissing = "missing"
	// LostStaleTerm: the owner lists it at another (older) term.
	LostStaleTerm = "stale_term"
)

// lostGrace is how many heartbeats in a row may miss an ASSIGNED channel
// before it is judged lost (one is forgiven).
const lostGrace = 2

// Metrics are the tracker's Prometheus series. A nil *Metrics records
// nothing.
type Metrics struct {
	LostWALs *prometheus.CounterVec // reason
}

// NewMetrics creates the series and registers them on reg (when not nil).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{LostWALs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coordd_pchannel_lost_wal_total",
		Help: "ASSIGNED PChannels the leader marked UNAVAILABLE for reassignment because their owner's heartbeats stopped listing the WAL at the current term, by reason: missing, stale_term."},
		[]string{"reason"})}
	if reg != nil {
		if err := reg.Register(m.LostWALs); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) lost(reason string) {
	if m != nil {
		m.LostWALs.WithLabelValues(reason).Inc()
	}
}

// miss counts the heartbeats in a row that did not list a channel at term.
type miss struct {
	term   int64
	count  int
	reason string
}

// lostWAL is a judged channel waiting for Watch to propose it.
type lostWAL struct {
	pchannel string
	term     int64
	node     uint64
	reason   string
	detail   string
}

// assigned is the ASSIGNED channels per owner, cached per assignment
// version (the state changes on every apply; the assignments rarely).
type assigned struct {
	version fsm.AssignmentVersion
	valid   bool
	byNode  map[uint64]map[string]int64 // node -> pchannel -> term
}

// assignedLocked returns the ASSIGNED channels of node in st.
func (t *Tracker) assignedLocked(st *fsm.State, node uint64) map[string]int64 {
	if v := st.AssignmentVersion(); !t.idx.valid || t.idx.version != v {
		by := map[uint64]map[string]int64{}
		for _, p := range st.PChannels() {
			if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
				continue
			}
			if by[p.NodeId] == nil {
				by[p.NodeId] = map[string]int64{}
			}
			by[p.NodeId][p.Name] = p.Term
		}
		t.idx = assigned{version: v, valid: true, byNode: by}
	}
	return t.idx.byNode[node]
}

// judgeHeld is one heartbeat's verdict on the channels assigned to a node:
// it updates misses (pchannel -> run of misses) from held and returns the
// channels whose run reached lostGrace. Pure in its arguments.
func judgeHeld(assignedHere, held map[string]int64, misses map[string]miss) []lostWAL {
	for p, m := range misses {
		if term, ok := assignedHere[p]; !ok || term != m.term {
			delete(misses, p) // moved on: judged afresh
		}
	}
	var lost []lostWAL
	for p, term := range assignedHere {
		h, ok := held[p]
		if ok && h == term {
			delete(misses, p)
			continue
		}
		m := misses[p]
		m.term, m.count = term, m.count+1
		m.reason = LostMissing
		detail := fmt.Sprintf("the owner's heartbeats did not list pchannel %s for %d heartbeats in a row; coordd has it ASSIGNED at term %d", p, m.count, term)
		if ok {
			m.reason = LostStaleTerm
			detail = fmt.Sprintf("the owner's heartbeats listed pchannel %s at term %d, not its ASSIGNED term %d, for %d heartbeats in a row", p, h, term, m.count)
		}
		misses[p] = m
		if m.count >= lostGrace {
			lost = append(lost, lostWAL{pchannel: p, term: term, reason: m.reason, detail: detail})
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i].pchannel < lost[j].pchannel })
	return lost
}

// heldLocked records what a heartbeat of node's session s says it holds
// and queues the channels judged lost.
func (t *Tracker) heldLocked(node uint64, s *session, held map[string]int64) {
	if s.misses == nil {
		s.misses = map[string]miss{}
	}
	here := t.assignedLocked(t.leader.State(), node)
	found := judgeHeld(here, held, s.misses)
	for _, l := range found {
		l.node = node
		key := fmt.Sprintf("%s@%d", l.pchannel, l.term)
		if _, queued := t.lost[key]; !queued {
			t.lost[key] = l
		}
	}
	if len(found) > 0 {
		select {
		case t.lostKick <- struct{}{}:
		default:
		}
	}
}

// takeLost returns and forgets the queued lost channels, by name.
func (t *Tracker) takeLost() []lostWAL {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]lostWAL, 0, len(t.lost))
	for _, l := range t.lost {
		out = append(out, l)
	}
	clear(t.lost)
	sort.Slice(out, func(i, j int) bool { return out[i].pchannel < out[j].pchannel })
	return out
}

// markLost proposes every queued lost channel UNAVAILABLE at its term. The
// FSM ignores a channel that moved on meanwhile (another term, another
// state), so a late judgement changes nothing. decider proposes (the
// leader routine's proposer, fenced by its term).
func (t *Tracker) markLost(ctx context.Context, decider commands.Proposer) {
	for _, l := range t.takeLost() {
		p, ok := t.leader.State().PChannel(l.pchannel)
		if !ok || p.State != logpb.PChannelState_PCHANNEL_ASSIGNED || p.Term != l.term || p.NodeId != l.node {
			continue // moved on since the heartbeat: nothing to do
		}
		reason := vocab.TruncateReason("lost WAL: " + l.detail)
		res, err := commands.CommitNew(ctx, decider, &logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{{
			Pchannel: l.pchannel, Term: l.term, Reason: reason}}}, "")
		var rej *commands.RejectedError
		if err != nil && !errors.As(err, &rej) {
			t.cfg.Logger.Warn("marking a lost WAL unavailable failed", "pchannel", l.pchannel, "term", l.term, "node", l.node, "error", err)
			continue
		}
		if err != nil || res.GetNumber() == 0 {
			continue // refused or nothing marked: the channel moved on
		}
		t.cfg.Metrics.lost(l.reason)
		t.cfg.Logger.Warn("owner lost the WAL of an ASSIGNED pchannel; reassigning it at a new term",
			"pchannel", l.pchannel, "term", l.term, "node", l.node, "reason", l.reason, "detail", l.detail)
	}
}
