package jepsen

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/harness"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/scenario"
	"github.com/coordd/coordd/jepsen-style-tests/workload"
)

func TestMain(m *testing.M) {
	code := m.Run()
	harness.Cleanup()
	os.Exit(code)
}

// seed is JEPSEN_SEED, or a fresh random seed (printed with every verdict).
func seed(t *testing.T) uint64 {
	if s := os.Getenv("JEPSEN_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("JEPSEN_SEED=%q: %v", s, err)
		}
		return v
	}
	return rand.Uint64() % 1_000_000_000
}

// TestJepsen runs the smoke matrix, the full matrix with JEPSEN_FULL=1, or
// the one scenario JEPSEN_SCENARIO names. Every run prints its seed and a
// one-line verdict; JEPSEN_SEED replays a schedule.
func TestJepsen(t *testing.T) {
	if testing.Short() {
		t.Skip("Jepsen-style runs start real clusters; skipped with -short")
	}
	var matrix []scenario.Scenario
	full := os.Getenv("JEPSEN_FULL") == "1"
	if name := os.Getenv("JEPSEN_SCENARIO"); name != "" {
		sc, isFull, ok := Find(name)
		if !ok {
			t.Fatalf("JEPSEN_SCENARIO=%q: no such scenario", name)
		}
		matrix, full = []scenario.Scenario{sc}, isFull
	} else if full {
		matrix = Full()
	} else {
		matrix = Smoke()
	}
	if d := os.Getenv("JEPSEN_DURATION"); d != "" {
		v, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("JEPSEN_DURATION=%q: %v", d, err)
		}
		for i := range matrix {
			matrix[i].Duration = v
		}
	}
	base := seed(t)
	for i, sc := range matrix {
		s := base + uint64(i) // one seed per scenario, all derived from the printed one
		if os.Getenv("JEPSEN_SEED") != "" {
			s = base
		}
		t.Run(sc.Name, func(t *testing.T) {
			scenario.Run(t, sc, s, full)
		})
	}
}

// TestCheckHistoryFile re-checks a recorded allocator history:
// JEPSEN_CHECK_HISTORY=path/to/history.jsonl.
func TestCheckHistoryFile(t *testing.T) {
	path := os.Getenv("JEPSEN_CHECK_HISTORY")
	if path == "" {
		t.Skip("set JEPSEN_CHECK_HISTORY to a history.jsonl")
	}
	ops, err := history.ReadJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	c := history.Count(ops)
	t.Logf("%d ops (ok %d, fail %d, info %d)", c.Total, c.Ok, c.Fail, c.Info)
	for _, r := range (&workload.Alloc{}).Check(ops, t.TempDir(), nil) {
		t.Log(r)
		if r.Verdict == checker.Invalid {
			t.Errorf("%s: invalid", r.Checker)
		}
	}
}
