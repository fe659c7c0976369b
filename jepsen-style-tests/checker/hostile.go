package checker

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// The hostile nemesis' checkers. They take the history's f names and the
// owner observations' shape as arguments (the nemesis package defines
// them), so this package stays free of the nemesis.

// HostileRefused checks that every forged call (f starting with prefix)
// was refused: an accepted one (ok) is a violation; one whose answer was
// lost (info) is counted but not judged (the data checkers see what it
// did, if anything). Calls of the harmless kinds are writes their
// credential may make (an Insert with a dedup ID): one accepted is
// counted, and the data checkers judge that it did no harm.
func HostileRefused(ops []history.Op, prefix string, harmless ...string) Result {
	r := Result{Checker: "hostile-refused", Verdict: Valid}
	type key struct{ kind, cred string }
	counts := map[key]*[3]int{} // refused, accepted, unknown
	for _, o := range ops {
		if !strings.HasPrefix(o.F, prefix) {
			continue
		}
		var in struct {
			Cred   string `json:"cred"`
			Target string `json:"target"`
			Node   uint64 `json:"node"`
			Term   int64  `json:"term"`
		}
		_ = json.Unmarshal(o.Input, &in)
		k := key{strings.TrimPrefix(o.F, prefix), in.Cred}
		if counts[k] == nil {
			counts[k] = &[3]int{}
		}
		switch o.Type {
		case history.Fail:
			counts[k][0]++
		case history.Ok:
			counts[k][1]++
			if slices.Contains(harmless, k.kind) {
				continue
			}
			r.Verdict = Invalid
			r.Violations++
			if len(r.Details) < 20 {
				r.Details = append(r.Details, fmt.Sprintf("op %d at %.3fs: forged %s with the %s credential (as node %d, term %d, on %s) was accepted",
					o.Index, float64(o.Invoke)/1e9, k.kind, in.Cred, in.Node, in.Term, in.Target))
			}
		default:
			counts[k][2]++
		}
	}
	if len(counts) == 0 {
		r.Verdict, r.Summary = Unknown, "no forged call was made"
		return r
	}
	var keys []key
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].kind != keys[j].kind {
			return keys[i].kind < keys[j].kind
		}
		return keys[i].cred < keys[j].cred
	})
	var parts []string
	for _, k := range keys {
		c := counts[k]
		parts = append(parts, fmt.Sprintf("%s/%s %d refused %d accepted %d unknown", k.kind, k.cred, c[0], c[1], c[2]))
	}
	r.Summary = strings.Join(parts, ", ")
	return r
}

// OwnerObservation is one PChannel in an owner observation.
type OwnerObservation struct {
	State string `json:"state"`
	Node  uint64 `json:"node"`
	Term  int64  `json:"term"`
	Held  bool   `json:"held"`
}

// PChannelsOwned checks that no PChannel went without a working owner (coordd
// says ASSIGNED to a node and that node holds the WAL at that term) for
// longer than bound, from the owner observations (f == fOwners, output a
// map from PChannel to OwnerObservation). A stretch still open at the last
// observation counts up to it; a PChannel counts from its first observed
// owner on (start-up assignment is not judged).
func PChannelsOwned(ops []history.Op, fOwners string, bound time.Duration) Result {
	r := Result{Checker: "pchannel-owned", Verdict: Valid}
	var obs []history.Op
	for _, o := range ops {
		if o.F == fOwners && o.Type == history.Ok {
			obs = append(obs, o)
		}
	}
	if len(obs) == 0 {
		r.Verdict, r.Summary = Unknown, "no owner observation"
		return r
	}
	sort.Slice(obs, func(i, j int) bool { return obs[i].Complete < obs[j].Complete })
	since := map[string]int64{}   // PChannel -> first observation of the current unowned stretch
	why := map[string]string{}    // what that observation saw
	longest := map[string]int64{} // PChannel -> longest stretch
	seen := map[string]bool{}     // PChannels observed owned once
	report := func(pch string, from, to int64) {
		d := to - from
		if d > longest[pch] {
			longest[pch] = d
		}
		if time.Duration(d) > bound {
			r.Verdict = Invalid
			r.Violations++
			if len(r.Details) < 20 {
				r.Details = append(r.Details, fmt.Sprintf("%s had no working owner from %.3fs to %.3fs (%v > bound %v): %s",
					pch, float64(from)/1e9, float64(to)/1e9, time.Duration(d).Round(time.Millisecond), bound, why[pch]))
			}
		}
	}
	var last int64
	for _, o := range obs {
		var view map[string]OwnerObservation
		if err := json.Unmarshal(o.Output, &view); err != nil {
			continue
		}
		last = o.Complete
		for pch, s := range view {
			owned := s.State == "ASSIGNED" && s.Held
			if owned {
				seen[pch] = true
			} else if !seen[pch] {
				continue // still being assigned for the first time (start-up)
			}
			start, open := since[pch]
			switch {
			case owned && open:
				report(pch, start, o.Complete)
				delete(since, pch)
			case !owned && !open:
				since[pch] = o.Invoke
				why[pch] = fmt.Sprintf("state %s, node %d, term %d, WAL held %v", s.State, s.Node, s.Term, s.Held)
			}
		}
	}
	for pch, start := range since {
		report(pch, start, last)
	}
	var parts []string
	for pch, d := range longest {
		parts = append(parts, fmt.Sprintf("%s %v", pch, time.Duration(d).Round(time.Millisecond)))
	}
	sort.Strings(parts)
	r.Summary = fmt.Sprintf("%d observations, bound %v; longest stretch without an owner: %s", len(obs), bound, strings.Join(parts, ", "))
	if len(parts) == 0 {
		r.Summary = fmt.Sprintf("%d observations, bound %v; every PChannel always had a working owner", len(obs), bound)
	}
	return r
}
