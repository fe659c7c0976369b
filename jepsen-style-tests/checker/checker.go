// Package checker judges histories recorded by Jepsen-style runs:
// linearizability with porcupine (one model per workload), invariants that
// are cheaper or more precise to check directly, and the end-of-run
// comparison of every replica's state machine.
package checker

import (
	"fmt"
	"strings"
)

// Verdict is a checker's judgement.
type Verdict string

const (
	// Valid: no violation found.
	Valid Verdict = "valid"
	// Invalid: a violation was found; Details say which.
	Invalid Verdict = "INVALID"
	// Unknown: the checker could not decide (e.g. porcupine timed out).
	Unknown Verdict = "unknown"
)

// maxDetails bounds the violations a Result lists.
const maxDetails = 20

// Result is one checker's outcome.
type Result struct {
	Checker string   `json:"checker"`
	Verdict Verdict  `json:"verdict"`
	Summary string   `json:"summary"`
	Details []string `json:"details,omitempty"`
	// Violations counts every violation found (Details lists at most 20).
	Violations int `json:"violations,omitempty"`
	// Artifact is a file the checker wrote (e.g. a porcupine HTML page).
	Artifact string `json:"artifact,omitempty"`
}

func (r *Result) violation(format string, args ...any) {
	r.Verdict = Invalid
	r.Violations++
	if len(r.Details) < maxDetails {
		r.Details = append(r.Details, fmt.Sprintf(format, args...))
	}
}

func (r Result) String() string {
	s := fmt.Sprintf("%s: %s (%s)", r.Checker, r.Verdict, r.Summary)
	if len(r.Details) > 0 {
		s += "\n    " + strings.Join(r.Details, "\n    ")
		if r.Violations > len(r.Details) {
			s += fmt.Sprintf("\n    ... and %d more", r.Violations-len(r.Details))
		}
	}
	return s
}

// Overall combines results: Invalid if any is, else Unknown if any is,
// else Valid.
func Overall(rs []Result) Verdict {
	v := Valid
	for _, r := range rs {
		switch r.Verdict {
		case Invalid:
			return Invalid
		case Unknown:
			v = Unknown
		}
	}
	return v
}
