package statuspage

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// Verdict levels, worst last.
const (
	levelHealthy     = "healthy"
	levelDegraded    = "degraded"
	levelUnavailable = "unavailable"
)

// lagWarn is the applied-index lag (entries) above which a member counts
// as lagging; the member table colours the same cells.
const lagWarn = 64

// verdict is the page's first line: one level and why.
type verdict struct {
	Level   string   // healthy, degraded or unavailable
	Reasons []string // why (empty when healthy)
	Summary string   // the counts behind it: leader, voters, nodes, pchannels
}

// Class is the CSS class of the verdict line.
func (v verdict) Class() string {
	switch v.Level {
	case levelHealthy:
		return "ok"
	case levelDegraded:
		return "warn"
	}
	return "bad"
}

// judge derives the verdict from what the page gathered. Unavailable: no
// leader, no quorum of voters answering, or PChannels without any UP
// streaming node that heartbeats (nothing can be written). Degraded:
// anything an operator should look at while the cluster still serves — an
// unreachable or lagging member, this member failing to write its storage
// (a full disk), a state at 90 % of its budget or over it, a streaming
// node DOWN with PChannels or silent (silence.go), PChannels not ASSIGNED,
// an imbalanced placement, a failing broadcast callback, a section that
// could not be read.
func judge(v *view) verdict {
	var bad, warn []string
	// A full disk shows nowhere else: a member's raft numbers can look
	// current while it stores nothing.
	for _, f := range v.Storage {
		warn = append(warn, fmt.Sprintf("member %s (this page's): %s", orUnknown(v.Self), f))
	}
	for _, m := range v.Members {
		for _, f := range m.Storage {
			warn = append(warn, fmt.Sprintf("member %s: %s", m.ID, f))
		}
	}
	if r := stateBudgetReason(v.StateBytes, v.StateBudget); r != "" {
		warn = append(warn, r)
	}
	if v.Leader == "" {
		bad = append(bad, "no leader known: writes and linearizable reads fail until an election completes")
	}
	voters, up := 0, 0
	for _, m := range v.Members {
		if m.Suffrage != "voter" {
			continue
		}
		voters++
		switch {
		case m.Err != "":
			warn = append(warn, fmt.Sprintf("member %s unreachable", m.ID))
		default:
			up++
			if m.Lag > lagWarn {
				warn = append(warn, fmt.Sprintf("member %s lags %d entries", m.ID, m.Lag))
			}
		}
	}
	if voters > 0 && up < voters/2+1 {
		bad = append(bad, fmt.Sprintf("only %d of %d voters answer (a quorum is %d)", up, voters, voters/2+1))
	}
	total, assigned, silentNodes, onSilent := 0, 0, 0, 0
	var notAssigned []string
	upNodes := map[uint64]int{}
	for _, g := range v.Nodes {
		if g.State == "DOWN" && len(g.PChannels) > 0 {
			// A DOWN session without channels is history (every restart
			// registers a new node ID); one still holding channels is not.
			warn = append(warn, fmt.Sprintf("streaming node %d (%s) is DOWN holding %d pchannel(s)", g.ID, g.Address, len(g.PChannels)))
		}
		silent := g.ownerState() == stateSilent
		if silent {
			// UP in the FSM, but nothing takes writes for its channels
			// until it beats again or the TTL moves them.
			silentNodes++
			warn = append(warn, silentReason(g))
		}
		if g.State == "UP" && !silent {
			upNodes[g.ID] = 0
		}
		for _, p := range g.PChannels {
			total++
			switch {
			case silent:
				onSilent++ // named by silentReason
			case p.State == "ASSIGNED" && g.State != "DOWN":
				assigned++
				if _, ok := upNodes[g.ID]; ok {
					upNodes[g.ID]++
				}
			default:
				notAssigned = append(notAssigned, p.Name+" "+p.State)
			}
		}
	}
	for _, p := range v.Unassigned {
		total++
		notAssigned = append(notAssigned, p.Name+" "+p.State)
	}
	if total > 0 && len(upNodes) == 0 {
		if silentNodes > 0 {
			bad = append(bad, fmt.Sprintf("no streaming node is UP and heartbeating (%d silent): inserts cannot be written", silentNodes))
		} else {
			bad = append(bad, "no streaming node is UP: inserts cannot be written")
		}
	}
	if len(notAssigned) > 0 {
		warn = append(warn, fmt.Sprintf("%d of %d pchannels not ASSIGNED on a live node (%s)", len(notAssigned), total, firstFew(notAssigned, 3)))
	}
	if imb := imbalance(upNodes); imb != "" {
		warn = append(warn, imb)
	}
	if v.FailingBcst > 0 {
		warn = append(warn, fmt.Sprintf("%d broadcast callback(s) failing", v.FailingBcst))
	}
	for _, e := range v.Errors {
		warn = append(warn, "could not read "+e)
	}
	out := verdict{Level: levelHealthy}
	switch {
	case len(bad) > 0:
		out.Level, out.Reasons = levelUnavailable, append(bad, warn...)
	case len(warn) > 0:
		out.Level, out.Reasons = levelDegraded, warn
	}
	leader := v.Leader
	if leader == "" {
		leader = "none"
	}
	out.Summary = fmt.Sprintf("leader %s · voters answering %d/%d · streaming nodes UP %d", leader, up, voters, len(upNodes))
	if silentNodes > 0 {
		out.Summary += fmt.Sprintf(" · SILENT %d", silentNodes)
	}
	out.Summary += fmt.Sprintf(" · pchannels ASSIGNED %d/%d", assigned, total)
	if onSilent > 0 {
		out.Summary += fmt.Sprintf(" · %d more on a silent node", onSilent)
	}
	return out
}

// imbalance names an uneven placement over the UP nodes: one node holding
// two or more PChannels more than another (the balancer evens that out
// within seconds; a lasting one is worth a look, or a 'pchannel
// rebalance' to hear why).
func imbalance(held map[uint64]int) string {
	if len(held) < 2 {
		return ""
	}
	ids := make([]uint64, 0, len(held))
	for id := range held {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	lo, hi := ids[0], ids[0]
	for _, id := range ids {
		if held[id] < held[lo] {
			lo = id
		}
		if held[id] > held[hi] {
			hi = id
		}
	}
	if held[hi]-held[lo] <= 1 {
		return ""
	}
	return fmt.Sprintf("pchannels imbalanced: node %d holds %d, node %d holds %d", hi, held[hi], lo, held[lo])
}

func firstFew(xs []string, n int) string {
	if len(xs) <= n {
		return strings.Join(xs, ", ")
	}
	return strings.Join(xs[:n], ", ") + fmt.Sprintf(", +%d more", len(xs)-n)
}

// hybridTime is a hybrid timestamp (physical ms << 18 | logical) as wall
// time in UTC, "" for 0.
func hybridTime(ts uint64) string {
	if ts == 0 {
		return ""
	}
	return time.UnixMilli(int64(ts >> 18)).UTC().Format("2006-01-02 15:04:05.000")
}

// collectionRow sums one collection's segments.
type collectionRow struct {
	ID                         int64
	Segments, Growing, Flushed int
	Rows                       int64 // rows in segments that are not Dropped
}

// collections sums segments per collection.
func collections(segs []*coordpb.SegmentInfo) []collectionRow {
	idx := map[int64]int{}
	var rows []collectionRow
	for _, s := range segs {
		i, ok := idx[s.CollectionId]
		if !ok {
			i = len(rows)
			idx[s.CollectionId] = i
			rows = append(rows, collectionRow{ID: s.CollectionId})
		}
		r := &rows[i]
		if s.State == "Dropped" {
			continue
		}
		r.Segments++
		r.Rows += s.NumOfRows
		switch s.State {
		case "Growing":
			r.Growing++
		case "Flushed":
			r.Flushed++
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
	return rows
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
