package main

import (
	"sort"
	"sync"
	"time"
)

// opStats collects one operation kind's outcomes in a load row: latency of
// every successful call, errors (the first few texts kept), and calls that
// could not even be issued because the kind's in-flight limit was full (the
// cluster fell behind the offered rate).
type opStats struct {
	mu       sync.Mutex
	lats     []time.Duration
	errs     int
	behind   int
	firstErr []string
	values   int64 // values carried by successful calls (checkpoints)
}

func (s *opStats) ok(d time.Duration, values int) {
	s.mu.Lock()
	s.lats = append(s.lats, d)
	s.values += int64(values)
	s.mu.Unlock()
}

func (s *opStats) fail(err error) {
	s.mu.Lock()
	s.errs++
	if len(s.firstErr) < 3 {
		s.firstErr = append(s.firstErr, err.Error())
	}
	s.mu.Unlock()
}

func (s *opStats) skipped() {
	s.mu.Lock()
	s.behind++
	s.mu.Unlock()
}

// summary is an opStats read out.
type summary struct {
	N, Errs, Behind int
	Values          int64
	P50, P99, Max   time.Duration
	FirstErr        []string
}

func (s *opStats) summary() summary {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := summary{N: len(s.lats), Errs: s.errs, Behind: s.behind, Values: s.values, FirstErr: append([]string(nil), s.firstErr...)}
	if len(s.lats) == 0 {
		return out
	}
	l := append([]time.Duration(nil), s.lats...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	pct := func(p float64) time.Duration { return l[min(len(l)-1, int(p*float64(len(l))))] }
	out.P50, out.P99, out.Max = pct(0.50), pct(0.99), l[len(l)-1]
	return out
}

// statSet is the opStats of every kind in a row, by name.
type statSet struct {
	mu sync.Mutex
	by map[string]*opStats
}

func newStatSet() *statSet { return &statSet{by: map[string]*opStats{}} }

func (s *statSet) get(name string) *opStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.by[name]
	if !ok {
		o = &opStats{}
		s.by[name] = o
	}
	return o
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
