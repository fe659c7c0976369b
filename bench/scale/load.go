package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

type grpcConn = grpc.ClientConnInterface

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// need is Milvus's coordination load at its documented maximum
// (docs/scaling.md#milvus-max): calls per second at 1×.
type need struct {
	name     string
	perSec   float64
	inflight int // most calls of the kind in flight; more are counted behind
}

var milvusMax = []need{
	{"UpdateChannelCheckpoints(128)", 52, 64},
	{"SaveBinlogPaths", 220, 64},
	{"Flush (seal)", 2, 8},
	{"CommitSegmentManifest", 10, 16},
	{"Broadcast CreateCollection(4)", 5, 32},
	{"AllocTimestamp", 2000, 256},
}

// flushSlots is how many flush-path VChannels the rows need: as many as
// SaveBinlogPaths calls the highest factor lets be in flight.
func flushSlots(factors []float64) int {
	top := 1.0
	for _, f := range factors {
		top = max(top, f)
	}
	return int(float64(milvusMax[1].inflight) * top)
}

// drive issues op at rate calls per second (open loop: the schedule does
// not wait for answers) until ctx ends; a call that would exceed inflight
// is not issued and counts as behind.
func drive(ctx context.Context, rate float64, inflight int, timeout time.Duration, st *opStats, op func(context.Context) (int, error)) {
	var wg sync.WaitGroup
	var running atomic.Int64
	start := time.Now()
	issued := 0
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for ctx.Err() == nil {
		due := int(time.Since(start).Seconds() * rate)
		for ; issued < due; issued++ {
			if running.Load() >= int64(inflight) {
				st.skipped()
				continue
			}
			running.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer running.Add(-1)
				cctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				t0 := time.Now()
				n, err := op(cctx)
				if err != nil {
					st.fail(err)
					return
				}
				st.ok(time.Since(t0), n)
			}()
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	wg.Wait()
}

// rowResult is one load row.
type rowResult struct {
	Factor    float64
	Duration  time.Duration
	Ops       map[string]summary
	Rates     map[string]float64 // offered calls/s
	Heartbeat summary
	Watchers  int
	Pushes    int64
	Probe     summary // a one-checkpoint write every 100 ms: the longest stall
	LeaderCPU float64 // leader CPU cores used (CPU s / wall s)
	AllCPU    float64 // every member's CPU cores together: with SelfCPU, the box's share
	SelfCPU   float64 // this load generator's CPU cores (same machine)
	RSS       map[string]float64
	Elections uint64
	Snapshots map[string]int // raft snapshots taken per member during the row
	StateMiB  float64
	Backup    time.Duration // a SaveSnapshot stream during the row (0: none)
	BackupMiB float64
	BackupMax time.Duration // longest probe write while the backup streamed
	Load      string
}

// sampler records each running member's largest RSS (every rssEvery) and
// the raft snapshots they take (every sampleEvery) until stopped.
type sampler struct {
	mu    sync.Mutex
	rss   map[string]float64
	snaps map[string]int
	last  map[string]float64
	state float64
	stop  chan struct{}
	done  chan struct{}
}

func startSampler(e *env) *sampler {
	s := &sampler{rss: map[string]float64{}, snaps: map[string]int{}, last: map[string]float64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		var scraped time.Time
		for {
			scrape := time.Since(scraped) >= sampleEvery
			if scrape {
				scraped = time.Now()
			}
			for _, m := range e.running() {
				r := rssMiB(m.pid())
				var mt map[string]float64
				if scrape {
					mt, _ = m.metrics()
				}
				s.mu.Lock()
				s.rss[m.id] = max(s.rss[m.id], r)
				if idx, ok := mt["coordd_last_snapshot_index"]; ok {
					if prev, seen := s.last[m.id]; seen && idx > prev {
						s.snaps[m.id]++
					}
					s.last[m.id] = idx
				}
				if v, ok := mt["coordd_state_bytes"]; ok && mt["coordd_is_leader"] == 1 {
					s.state = v / (1 << 20)
				}
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-time.After(rssEvery):
			}
		}
	}()
	return s
}

func (s *sampler) finish() (map[string]float64, map[string]int, float64) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rss, s.snaps, s.state
}

// loadRow drives every kind of milvusMax at factor × its rate for d, with
// the simulated nodes heartbeating factor times a second and 100×factor
// assignment watchers open; with backupAt > 0 a SaveSnapshot stream
// starts that far into the row.
func (e *env) loadRow(ctx context.Context, factor float64, d time.Duration, fp *flushPath, mf *manifestSet, collBase *atomic.Int64, backupAt time.Duration) rowResult {
	res := rowResult{Factor: factor, Duration: d, Ops: map[string]summary{}, Rates: map[string]float64{}, Load: loadAvg()}
	set := newStatSet()
	assignSt := set.get("AssignSegmentID")
	ops := map[string]func(context.Context) (int, error){
		milvusMax[0].name: nil, // per call index, below
		milvusMax[1].name: e.saveOp(fp, assignSt),
		milvusMax[2].name: e.sealOp(fp),
		milvusMax[3].name: e.manifestOp(mf),
		milvusMax[4].name: func(ctx context.Context) (int, error) {
			_, err := e.createCollection(ctx, e.leaderConn(), collBase.Add(1), 4)
			return 1, err
		},
		milvusMax[5].name: e.allocOp(),
	}
	var cpIdx atomic.Int64
	ops[milvusMax[0].name] = func(ctx context.Context) (int, error) { return e.checkpointOp(int(cpIdx.Add(1)))(ctx) }

	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	// Watchers: 100 × factor streams, spread over the members.
	wctx, wcancel := context.WithCancel(ctx)
	res.Watchers = max(e.baseWatchers, int(100*factor))
	pushes0 := e.sn.pushCount()
	for i := range max(0, res.Watchers-e.baseWatchers) {
		go e.sn.watch(wctx, e.conns, i)
	}
	hb := set.get("Heartbeat")
	e.hbStats.Store(hb)
	e.hbInterval.Store(int64(float64(time.Second) / factor))
	defer e.hbInterval.Store(int64(time.Second))
	defer e.hbStats.Store(&opStats{})
	probe := &probeLog{}
	wg.Add(1)
	go func() { defer wg.Done(); e.probe(rctx, probe) }()
	for _, n := range milvusMax {
		res.Rates[n.name] = n.perSec * factor
		wg.Add(1)
		go func() {
			defer wg.Done()
			drive(rctx, n.perSec*factor, int(float64(n.inflight)*max(1, factor)), 30*time.Second, set.get(n.name), ops[n.name])
		}()
	}
	if backupAt > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-rctx.Done():
				return
			case <-time.After(backupAt):
			}
			t0 := time.Now()
			n, err := e.saveSnapshot(rctx)
			res.Backup, res.BackupMiB = time.Since(t0), float64(n)/(1<<20)
			if err != nil {
				fmt.Printf("    backup during the row: %v\n", err)
			}
			res.BackupMax = probe.maxBetween(t0, t0.Add(res.Backup))
		}()
	}
	smp := startSampler(e)
	lead, _, err := e.leader(ctx, 10*time.Second)
	var cpu0 float64
	if err == nil {
		cpu0 = cpuSeconds(lead.pid())
	}
	term0 := e.maxTerm(ctx)
	self0 := cpuSeconds(os.Getpid())
	members := e.running()
	all0 := make([]float64, len(members))
	for i, m := range members {
		all0[i] = cpuSeconds(m.pid())
	}
	t0 := time.Now()
	wg.Wait()
	wall := time.Since(t0)
	res.SelfCPU = (cpuSeconds(os.Getpid()) - self0) / wall.Seconds()
	if lead != nil && lead.running() {
		res.LeaderCPU = (cpuSeconds(lead.pid()) - cpu0) / wall.Seconds()
	}
	for i, m := range members {
		if m.running() {
			res.AllCPU += (cpuSeconds(m.pid()) - all0[i]) / wall.Seconds()
		}
	}
	res.Elections = e.maxTerm(ctx) - term0
	wcancel()
	res.RSS, res.Snapshots, res.StateMiB = smp.finish()
	res.Pushes = e.sn.pushCount() - pushes0
	for name, st := range set.by {
		res.Ops[name] = st.summary()
	}
	res.Heartbeat = hb.summary()
	res.Probe = probe.summary()
	return res
}
