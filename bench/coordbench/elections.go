package main

import (
	"sync"
	"time"

	"github.com/coordd/coordd/cluster"
)

// Leader elections during a run, counted from every member's /metrics,
// sampled every second:
//
//   - term_increase: the highest coordd_raft_term at the end minus at the
//     start; every election round (a candidacy that got as far as a vote
//     request) starts a new term, so this counts election rounds, won or
//     not. coordd_raft_term is a gauge of coordd's own registry: it never
//     expires.
//   - candidate_transitions, leader_transitions, heartbeat_timeouts:
//     hashicorp/raft's raft.state.candidate, raft.state.leader and
//     raft.transition.heartbeat_timeout counters summed over the members
//     (a follower that heard no leader for a heartbeat timeout, became a
//     candidate, became leader). These come through the go-metrics
//     Prometheus sink, which drops a counter not incremented for a minute
//     (api/metrics: Expiration) and starts it from 0 when incremented
//     again: monotonic adds up such a counter across gaps and resets.
//   - leader_changes_observed: how often the member reporting
//     coordd_is_leader 1 was another one than at the previous sample that
//     had one (a leader lost and won back between two samples is not
//     seen here; the counters above see it).
type electionCount struct {
	TermIncrease         uint64  `json:"term_increase"`
	CandidateTransitions float64 `json:"candidate_transitions"`
	LeaderTransitions    float64 `json:"leader_transitions"`
	HeartbeatTimeouts    float64 `json:"heartbeat_timeouts"`
	LeaderChanges        int     `json:"leader_changes_observed"`
	Samples              int     `json:"metric_samples"`
	FailedScrapes        int     `json:"failed_scrapes"`
}

const (
	metricTerm      = "coordd_raft_term"
	metricCandidate = "coordd_raft_state_candidate"
	metricLeader    = "coordd_raft_state_leader"
	metricHBTimeout = "coordd_raft_transition_heartbeat_timeout"
	metricIsLeader  = "coordd_is_leader"
)

// monotonic adds up one member's counter from successive scrapes.
type monotonic struct {
	last  float64
	seen  bool
	total float64
}

// observe takes one successful scrape's value (present false: the page
// had no such counter). Absent is 0: never incremented, or dropped by the
// sink after a minute without increments, to start again from 0. A value
// below the last one is a counter started again (dropped and incremented,
// or a restarted member): all of it is new. The first scrape is the
// baseline.
func (m *monotonic) observe(v float64, present bool) {
	if !present {
		v = 0
	}
	switch {
	case !m.seen:
		m.seen = true
	case v >= m.last:
		m.total += v - m.last
	default:
		m.total += v
	}
	m.last = v
}

// electionTally is the state kept between samples.
type electionTally struct {
	members                 int
	candidate, leader, hbto []monotonic
	firstTerm, lastTerm     float64
	termSeen                bool
	lastLeader              int // member index; -1 none seen yet
	out                     electionCount
}

func newElectionTally(members int) *electionTally {
	return &electionTally{members: members, candidate: make([]monotonic, members), leader: make([]monotonic, members),
		hbto: make([]monotonic, members), lastLeader: -1}
}

// add takes one sample: scrapes[i] is member i's page, nil when its scrape
// failed (nothing is concluded from it).
func (t *electionTally) add(scrapes []map[string]float64) {
	t.out.Samples++
	maxTerm, leaderNow, leaders := 0.0, -1, 0
	for i, mt := range scrapes {
		if mt == nil {
			t.out.FailedScrapes++
			continue
		}
		get := func(k string) (float64, bool) { v, ok := mt[k]; return v, ok }
		t.candidate[i].observe(get(metricCandidate))
		t.leader[i].observe(get(metricLeader))
		t.hbto[i].observe(get(metricHBTimeout))
		maxTerm = max(maxTerm, mt[metricTerm])
		if mt[metricIsLeader] == 1 {
			leaderNow, leaders = i, leaders+1
		}
	}
	if maxTerm > 0 {
		if !t.termSeen {
			t.firstTerm, t.termSeen = maxTerm, true
		}
		t.lastTerm = max(t.lastTerm, maxTerm)
	}
	if leaders == 1 {
		if t.lastLeader >= 0 && leaderNow != t.lastLeader {
			t.out.LeaderChanges++
		}
		t.lastLeader = leaderNow
	}
}

func (t *electionTally) result() electionCount {
	out := t.out
	if t.termSeen {
		out.TermIncrease = uint64(t.lastTerm - t.firstTerm)
	}
	for i := range t.members {
		out.CandidateTransitions += t.candidate[i].total
		out.LeaderTransitions += t.leader[i].total
		out.HeartbeatTimeouts += t.hbto[i].total
	}
	return out
}

// watchElections samples the members every interval until the returned
// function is called, which takes a last sample and returns the count.
func watchElections(l *cluster.Launcher, interval time.Duration) func() electionCount {
	members := l.Members()
	t := newElectionTally(len(members))
	sample := func() {
		scrapes := make([]map[string]float64, len(members))
		var wg sync.WaitGroup
		for i, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if mt, err := scrape(m.HTTPAddr); err == nil {
					scrapes[i] = mt
				}
			}()
		}
		wg.Wait()
		t.add(scrapes)
	}
	sample()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				sample()
			}
		}
	}()
	return func() electionCount {
		close(stop)
		<-done
		sample()
		return t.result()
	}
}
