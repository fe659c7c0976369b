package statuspage

import "fmt"

// Silent streaming nodes (docs/operations.md#silent-streaming-nodes): a
// node the FSM still calls UP whose heartbeat the leader sees late. Its
// PChannels cannot take writes, yet nothing moves them until the TTL runs
// out and coordd marks the node DOWN. The leader alone knows heartbeat
// ages and judges silence (ListNodes' silent and silent_after_ms); this
// page only shows the judgement, and a follower's page says it cannot
// and links to the leader's.

// stateSilent is the state a silent node is shown in.
const stateSilent = "SILENT"

// ownerState is the state the page shows for g: SILENT when the leader
// judged it so, else its FSM state.
func (g nodeGroup) ownerState() string {
	if g.Silent && g.State != "DOWN" {
		return stateSilent
	}
	return g.State
}

// ShownState is the node header's state.
func (g nodeGroup) ShownState() string { return g.ownerState() }

// silentReason is the verdict's sentence for a silent node: who, for how
// long, what cannot be written, and when coordd acts (the TTL marks it
// DOWN and its PChannels move).
func silentReason(g nodeGroup) string {
	s := fmt.Sprintf("streaming node %d (%s) silent for %s (no heartbeat; silent after %s)", g.ID, g.Address, humanMs(g.AgeMs), humanMs(g.SilentAfterMs))
	if n := len(g.PChannels); n > 0 {
		names := make([]string, n)
		for i, p := range g.PChannels {
			names[i] = p.Name
		}
		s += fmt.Sprintf(": %d pchannel(s) cannot take writes (%s)", n, firstFew(names, 3))
	} else {
		s += ": it holds no pchannels"
	}
	if g.TTLMs > 0 {
		left := max(g.TTLMs-g.AgeMs, 0)
		s += fmt.Sprintf("; coordd marks it DOWN and moves them when its %s TTL runs out, in %s", humanMs(g.TTLMs), humanMs(left))
	}
	return s
}

// leaderPage tells whether this member leads and, when it does not, the
// leader's /ui (empty when the leader or its HTTP address is unknown).
func leaderPage(v *view, scheme string) (bool, string) {
	if v.Leader != "" && v.Leader == v.Self {
		return true, ""
	}
	for _, m := range v.Members {
		if m.ID == v.Leader && m.HTTPAddr != "" {
			return false, scheme + "://" + m.HTTPAddr + "/ui"
		}
	}
	return false, ""
}

// scheme is how members' pages are reached: "http" unless set.
func (h Handler) scheme() string {
	if h.Scheme == "" {
		return "http"
	}
	return h.Scheme
}

// DownInMs is how long until the TTL marks a silent node DOWN.
func (g nodeGroup) DownInMs() int64 { return max(g.TTLMs-g.AgeMs, 0) }

// OwnerDown: the row's owner is DOWN or silent, so whatever its state
// says, the PChannel cannot take writes now.
func (p pchannelRow) OwnerDown() bool { return p.Owner == "DOWN" || p.Owner == stateSilent }

// Class is the row's colour: its own state's, but never green under an
// owner that cannot serve it.
func (p pchannelRow) Class() string {
	if p.OwnerDown() {
		return "bad"
	}
	return stateClass(p.State)
}
