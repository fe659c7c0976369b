package checker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

func forged(idx int, kind, cred string, typ history.Type) history.Op {
	in, _ := json.Marshal(map[string]any{"cred": cred, "target": "dml_0_100v0", "node": 1, "term": 2})
	return history.Op{Index: idx, F: "hostile:" + kind, Input: in, Type: typ, Invoke: int64(idx) * 1e6, Complete: int64(idx)*1e6 + 10}
}

func TestHostileRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want Verdict
	}{
		{"every forged call refused", []history.Op{forged(0, "checkpoint", "read", history.Fail), forged(1, "remove", "proxy", history.Fail),
			forged(2, "ack", "admin", history.Info)}, Valid},
		{"a forged checkpoint accepted", []history.Op{forged(0, "checkpoint", "read", history.Fail), forged(1, "checkpoint", "proxy", history.Ok)}, Invalid},
		{"a stray remove accepted", []history.Op{forged(0, "remove", "other-node", history.Ok)}, Invalid},
		{"no forged call", []history.Op{{F: "insert", Type: history.Ok}}, Unknown},
		// An insert claiming a broadcast ID is a write the proxy may make:
		// its effect is judged (broadcast-at-most-once), not its acceptance.
		{"a harmless claim accepted", []history.Op{forged(0, "claim-insert", "proxy", history.Ok), forged(1, "claim-append", "proxy", history.Fail)}, Valid},
		{"a broadcast-ID claim accepted", []history.Op{forged(0, "claim-insert", "proxy", history.Ok), forged(1, "claim-append", "proxy", history.Ok)}, Invalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := HostileRefused(tc.ops, "hostile:", "claim-insert")
			if r.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s: %v", r.Verdict, tc.want, r)
			}
		})
	}
}

// owners builds an owner observation at second at: pch -> owned?
func owners(idx int, at float64, view map[string]OwnerObservation) history.Op {
	out, _ := json.Marshal(view)
	ns := int64(at * 1e9)
	return history.Op{Index: idx, F: "pchannel-owners", Type: history.Ok, Output: out, Invoke: ns, Complete: ns + 1e6}
}

func TestPChannelsOwned(t *testing.T) {
	ok := OwnerObservation{State: "ASSIGNED", Node: 1, Term: 2, Held: true}
	lost := OwnerObservation{State: "ASSIGNED", Node: 1, Term: 2, Held: false} // coordd says ASSIGNED, the node dropped the WAL
	moving := OwnerObservation{State: "ASSIGNING", Node: 2, Term: 3}
	bound := 3 * time.Second
	series := func(states ...OwnerObservation) []history.Op {
		var ops []history.Op
		for i, s := range states {
			ops = append(ops, owners(i, float64(i), map[string]OwnerObservation{"dml_0": s, "dml_1": ok}))
		}
		return ops
	}
	for _, tc := range []struct {
		name string
		ops  []history.Op
		want Verdict
	}{
		{"always owned", series(ok, ok, ok, ok), Valid},
		{"a move within the bound", series(ok, moving, moving, ok, ok), Valid},
		{"start-up assignment is not judged", series(moving, moving, moving, moving, moving, ok, ok), Valid},
		{"a lost WAL the leader never reassigns", series(ok, ok, lost, lost, lost, lost, lost, lost), Invalid},
		{"a move longer than the bound", series(ok, moving, moving, moving, moving, moving, ok), Invalid},
		{"no observation", nil, Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := PChannelsOwned(tc.ops, "pchannel-owners", bound)
			if r.Verdict != tc.want {
				t.Fatalf("verdict %s, want %s: %v", r.Verdict, tc.want, r)
			}
		})
	}
}
