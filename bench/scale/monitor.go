package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// monitor watches every running member's raft term, heap and garbage
// collector every monitorEvery for the whole run. An election (the highest
// term going up) is recorded with the phase the run was in and each
// member's heap, GC count and longest recent GC pause, the evidence of
// why a member lost its leader (docs/scaling.md#elections-at-size).
// monitorEvery and sampleEvery space the bench's own scrapes of every
// member's /metrics. At 65,536 VChannels a scrape is ~65k series (one
// checkpoint lag per VChannel, as Milvus exports it), and scraping three
// times a second took a tenth of the leader's CPU in a 1M-segment profile;
// a Prometheus scrapes every 15-30 s. Spaced to every 2 s and 5 s, the
// scrapes were still a tenth of a follower's CPU in the 5× row; at 5 s and
// 10 s they are about a twentieth. An election is attributed to the phase
// that was running at most monitorEvery after it; RSS is read from /proc
// every second (no scrape).
const (
	monitorEvery = 5 * time.Second
	sampleEvery  = 10 * time.Second
	rssEvery     = time.Second
)

type monitor struct {
	mu      sync.Mutex
	start   time.Time
	phase   string
	term    uint64
	events  []string
	byPhase map[string]int
}

func newMonitor() *monitor { return &monitor{start: time.Now(), byPhase: map[string]int{}} }

func (mo *monitor) setPhase(p string) {
	mo.mu.Lock()
	mo.phase = p
	mo.mu.Unlock()
}

func (mo *monitor) run(ctx context.Context, e *env) {
	for ctx.Err() == nil {
		var top uint64
		var parts []string
		for _, m := range e.running() {
			mt, err := m.metrics()
			if err != nil {
				parts = append(parts, fmt.Sprintf("%s no metrics", m.id))
				continue
			}
			top = max(top, uint64(mt["coordd_raft_term"]))
			parts = append(parts, fmt.Sprintf("%s heap %.0f MiB rss %.0f MiB gc %.0f (max pause %.0f ms) leader=%v",
				m.id, mt["go_memstats_heap_inuse_bytes"]/(1<<20), rssMiB(m.pid()), mt["go_gc_duration_seconds_count"],
				mt[`go_gc_duration_seconds{quantile="1"}`]*1000, mt["coordd_is_leader"] == 1))
		}
		sort.Strings(parts)
		mo.mu.Lock()
		if mo.term != 0 && top > mo.term {
			ev := fmt.Sprintf("%6.1fs [%s] term %d -> %d: %s", time.Since(mo.start).Seconds(), mo.phase, mo.term, top, strings.Join(parts, "; "))
			mo.events = append(mo.events, ev)
			mo.byPhase[mo.phase] += int(top - mo.term)
			fmt.Println("  election:", ev)
		}
		if top > mo.term {
			mo.term = top
		}
		mo.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(monitorEvery):
		}
	}
}

func (mo *monitor) report() (map[string]int, []string) {
	mo.mu.Lock()
	defer mo.mu.Unlock()
	out := map[string]int{}
	for k, v := range mo.byPhase {
		out[k] = v
	}
	return out, append([]string(nil), mo.events...)
}
