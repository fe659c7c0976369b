package main

import "testing"

// A counter is added up across the sink dropping it (absent) and starting
// it again from 0, and across a member restart (a lower value).
func TestMonotonicCounter(t *testing.T) {
	var m monotonic
	for _, s := range []struct {
		v       float64
		present bool
	}{{2, true}, {2, true}, {3, true}, {0, false}, {1, true}, {4, true}, {1, true}} {
		m.observe(s.v, s.present)
	}
	// baseline 2; +1 (3); dropped; +1 (1); +3 (4); restarted: +1
	if m.total != 6 {
		t.Fatalf("total %v, want 6", m.total)
	}
	var fresh monotonic
	fresh.observe(0, false) // not there at the start: a baseline of 0
	fresh.observe(1, true)
	if fresh.total != 1 {
		t.Fatalf("a counter first seen after the start: %v, want 1", fresh.total)
	}
}

func page(term, cand, lead, isLeader float64) map[string]float64 {
	p := map[string]float64{metricTerm: term, metricIsLeader: isLeader}
	if cand > 0 {
		p[metricCandidate] = cand
	}
	if lead > 0 {
		p[metricLeader] = lead
	}
	return p
}

// One election during the run: member 0 led at term 2, member 1 won term
// 3 (member 2's scrape failing meanwhile); the start's counts are the
// baseline.
func TestElectionTally(t *testing.T) {
	tl := newElectionTally(3)
	tl.add([]map[string]float64{page(2, 1, 1, 1), page(2, 0, 0, 0), page(2, 0, 0, 0)})
	tl.add([]map[string]float64{page(2, 1, 1, 1), page(2, 0, 0, 0), page(2, 0, 0, 0)})
	tl.add([]map[string]float64{page(3, 1, 1, 0), page(3, 1, 0, 0), nil}) // no leader yet
	tl.add([]map[string]float64{page(3, 1, 1, 0), page(3, 1, 1, 1), page(3, 0, 0, 0)})
	got := tl.result()
	want := electionCount{TermIncrease: 1, CandidateTransitions: 1, LeaderTransitions: 1, LeaderChanges: 1, Samples: 4, FailedScrapes: 1}
	if got != want {
		t.Fatalf("tally %+v, want %+v", got, want)
	}
	quiet := newElectionTally(3)
	for range 5 {
		quiet.add([]map[string]float64{page(7, 1, 1, 1), page(7, 0, 0, 0), page(7, 0, 0, 0)})
	}
	if got := quiet.result(); got.TermIncrease != 0 || got.CandidateTransitions != 0 || got.LeaderTransitions != 0 || got.LeaderChanges != 0 {
		t.Fatalf("a quiet run counted %+v", got)
	}
}
