// Package report writes the per-run report directory of a Jepsen-style
// run: the history (history.jsonl), the nemesis plan and timeline
// (timeline.json), a summary with every checker result (summary.json), a
// latency/throughput-over-time plot with fault windows shaded
// (latency.png), and — written by the checkers on failure — porcupine's
// HTML visualisation and the diverging snapshots.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
)

// Summary is everything about one run but the raw history.
type Summary struct {
	Scenario string `json:"scenario"`
	Seed     uint64 `json:"seed"`
	Nodes    int    `json:"nodes"`
	// Security is the configuration the run used: "tls+tokens" (the
	// default, as deployed) or "insecure".
	Security    string           `json:"security"`
	Workloads   []string         `json:"workloads"`
	Faults      []string         `json:"fault_kinds"`
	Started     time.Time        `json:"started"`
	Wall        time.Duration    `json:"wall_ns"`
	LoadTime    time.Duration    `json:"load_ns"`
	Ops         history.Counts   `json:"ops"`
	Injected    int              `json:"faults_injected"`
	ByKind      map[string]int   `json:"faults_by_kind"`
	FaultErrors int              `json:"fault_errors"`
	Results     []checker.Result `json:"results"`
	Crashes     []string         `json:"crashes,omitempty"`
	Verdict     checker.Verdict  `json:"verdict"`
	Coverage    map[string]int   `json:"coverage,omitempty"` // raft events counted in the member logs
	Repro       string           `json:"repro"`
	// ExpectViolation: a test of the tests, where FAIL is the right verdict.
	ExpectViolation bool `json:"expect_violation,omitempty"`
	// KnownDefect: the run is expected to fail because of this open defect.
	KnownDefect string            `json:"known_defect,omitempty"`
	Extra       map[string]string `json:"extra,omitempty"`
}

// Timeline is what timeline.json holds.
type Timeline struct {
	Plan    []nemesis.Step   `json:"plan"`
	Windows []nemesis.Window `json:"windows"`
}

// FaultCounts tallies windows by kind and counts the ones with errors.
func FaultCounts(ws []nemesis.Window) (byKind map[string]int, errs int) {
	byKind = map[string]int{}
	for _, w := range ws {
		byKind[string(w.Kind)]++
		if w.Error != "" {
			errs++
		}
	}
	return byKind, errs
}

// Write writes history.jsonl, timeline.json, summary.json and latency.png
// into dir.
func Write(dir string, s Summary, ops []history.Op, tl Timeline) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := history.WriteJSONL(filepath.Join(dir, "history.jsonl"), ops); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "timeline.json"), tl); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(dir, "summary.json"), s); err != nil {
		return err
	}
	return Plot(filepath.Join(dir, "latency.png"), s.Scenario, ops, tl.Windows)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// VerdictLine is the one-line verdict of a run.
func VerdictLine(s Summary, dir string) string {
	var kinds []string
	for k, n := range s.ByKind {
		kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(kinds)
	var checks []string
	for _, r := range s.Results {
		checks = append(checks, fmt.Sprintf("%s=%s", r.Checker, r.Verdict))
	}
	word := "PASS"
	switch s.Verdict {
	case checker.Invalid:
		word = "FAIL"
	case checker.Unknown:
		word = "UNKNOWN"
	}
	switch {
	case s.KnownDefect != "":
		word += "(expected FAIL: known defect)"
	case s.ExpectViolation:
		word += "(expected FAIL: injected bug)"
	}
	var cov []string
	for k, n := range s.Coverage {
		cov = append(cov, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(cov)
	return fmt.Sprintf("JEPSEN %s scenario=%s seed=%d nodes=%d security=%s ops=%d (ok %d, fail %d, info %d) faults=%d [%s] raft: %s; crashes=%d; checks: %s; wall %v; report %s; repro: %s",
		word, s.Scenario, s.Seed, s.Nodes, s.Security, s.Ops.Total, s.Ops.Ok, s.Ops.Fail, s.Ops.Info,
		s.Injected, strings.Join(kinds, " "), strings.Join(cov, " "), len(s.Crashes), strings.Join(checks, " "),
		s.Wall.Round(100*time.Millisecond), dir, s.Repro)
}
