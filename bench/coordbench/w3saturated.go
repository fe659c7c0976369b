package main

import (
	"fmt"
	"os"
	"time"

	"github.com/coordd/coordd/cluster"
)

// saturatedRow is w3 under a saturated machine (coordd only: the question
// is whether coordd's own timing holds, not a ratio).
type saturatedRow struct {
	Workload    string  `json:"workload"`
	Variant     string  `json:"variant"`
	Clients     int     `json:"clients"`
	DurationS   float64 `json:"duration_s"`
	Hogs        int     `json:"cpu_hogs"`
	CoorddFlags string  `json:"coordd_flags"`
	Ops         int     `json:"ops"`
	Errors      int     `json:"errors"`
	OpsPerSec   float64 `json:"ops_per_sec"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	electionCount
}

// w3Saturated runs w3 (checkpoint+binlogs-1000vch) closed-loop against
// coordd's leader for d while hogs CPU hog processes keep the machine's
// cores busy, and counts the leader elections meanwhile (electionCount).
// The hogs start after the data set-up and before the warm-up second, and
// are killed when the run ends, also on an error.
func w3Saturated(l *cluster.Launcher, cs *system, clients int, d time.Duration, nhogs int, coorddFlags string) (saturatedRow, error) {
	row := saturatedRow{Workload: "w3-saturated", Variant: "checkpoint+binlogs-1000vch", Clients: clients, Hogs: nhogs, CoorddFlags: coorddFlags}
	if err := setupData(cs); err != nil {
		return row, err
	}
	if err := cs.refresh(); err != nil {
		return row, err
	}
	h, err := startHogs(nhogs, nil)
	if err != nil {
		return row, err
	}
	defer h.stop()
	fmt.Fprintf(os.Stderr, "coordbench: w3-saturated: %d CPU hogs %v for %v\n", nhogs, h.pids(), d)
	var count func() electionCount
	// No -max-ops cap: the run lasts d.
	st := runCell(clients, d, 10*time.Second, 1<<62, func(c int) clientOp { return w3Op(cs, c, clients) },
		func() { count = watchElections(l, time.Second) })
	row.electionCount = count()
	row.DurationS = st.Elapsed.Seconds()
	row.Ops, row.Errors, row.OpsPerSec, row.P50ms, row.P99ms, row.MaxMs = st.Ops, st.Errors, round1(st.OpsPerSec), st.P50ms, st.P99ms, st.MaxMs
	if st.Ops == 0 {
		return row, fmt.Errorf("no call succeeded (%d errors, first: %v)", st.Errors, st.FirstErr)
	}
	return row, nil
}
