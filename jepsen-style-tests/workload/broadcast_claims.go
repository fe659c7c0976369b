package workload

import (
	"fmt"
	"strings"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// The claim writer's part of broadcast-at-most-once: its claims counted
// per kind, and the hits among them (nemesis/claim.go says what it does).

// claimPayloadPrefix is nemesis.ClaimPayloadPrefix (the nemesis package
// is not imported here: the workload does not depend on the nemesis).
const claimPayloadPrefix = "hostile-claim-"

// claimFigures summarises the claim writer's ops: per kind refused /
// accepted / unknown, and the hits (a claim that named the ID and
// VChannel of one of coordd's broadcasts, which then landed with
// coordd's payload: rule 4 and 5 held against it). An accepted insert
// claim's DML record is counted as in its own key space.
func claimFigures(ops []history.Op, claimPrefix string, rec map[vkey]walRec, dml map[vkey]int) string {
	if claimPrefix == "" {
		return "no claim writer"
	}
	type counts struct{ refused, accepted, unknown, hits int }
	byKind := map[string]*counts{}
	for _, o := range ops {
		if !strings.HasPrefix(o.F, claimPrefix) {
			continue
		}
		var in struct {
			Target string `json:"target"`
			ID     uint64 `json:"broadcast_id"`
		}
		_ = decode(o.Input, &in)
		k := strings.TrimPrefix(o.F, claimPrefix)
		if byKind[k] == nil {
			byKind[k] = &counts{}
		}
		switch o.Type {
		case history.Fail:
			byKind[k].refused++
		case history.Ok:
			byKind[k].accepted++
		default:
			byKind[k].unknown++
		}
		if r, ok := rec[vkey{in.Target, in.ID}]; ok && !strings.HasPrefix(r.Payload, claimPayloadPrefix) {
			byKind[k].hits++
		}
	}
	if len(byKind) == 0 {
		return "no claims made"
	}
	var parts []string
	for _, k := range sortedKeys(byKind) {
		c := byKind[k]
		parts = append(parts, fmt.Sprintf("%s %d refused %d accepted %d unknown %d hits", k, c.refused, c.accepted, c.unknown, c.hits))
	}
	n := 0
	for _, c := range dml {
		n += c
	}
	return fmt.Sprintf("claims: %s (%d DML records with a dedup ID, in their own key space)", strings.Join(parts, ", "), n)
}
