package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

// failoverRow is the leader-kill-under-load result (coordd only: the peer
// has no failover of its own to compare).
type failoverRow struct {
	Workload  string    `json:"workload"`
	Clients   int       `json:"clients"`
	Trials    int       `json:"trials"`
	MedianMs  float64   `json:"median_ms"`
	P99Ms     float64   `json:"p99_ms"`
	MaxMs     float64   `json:"max_ms"`
	TrialsMs  []float64 `json:"trials_ms"`
	LoadOK    int64     `json:"load_ok"`
	LoadFails int64     `json:"load_errors"`
}

// w3Failover keeps the w3 load running (clients spread over all three
// members: followers forward) and, per trial, SIGKILLs the leader and times
// until a checkpoint of a VChannel the load does not touch is accepted
// through a survivor: the first committed write after the kill. The killed
// member is restarted and has caught up before the next trial.
func w3Failover(l *cluster.Launcher, cs *system, clients, trials int) (failoverRow, error) {
	if err := setupData(cs); err != nil {
		return failoverRow{}, err
	}
	var conns []*grpc.ClientConn
	for _, m := range l.Members() {
		c, err := dial(m.GRPCAddr)
		if err != nil {
			return failoverRow{}, err
		}
		defer c.Close()
		conns = append(conns, c)
	}
	probe := cs.data.vchs[0]
	load := &system{name: "coordd", conns: conns, data: &dataSet{vchs: cs.data.vchs[1:]}}
	load.data.owners.Store(cs.data.owners.Load())
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var okN, errN atomic.Int64
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			op := w3Op(load, c, clients)
			for i := 0; ctx.Err() == nil && i < 10_000_000; i++ {
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := op(cctx, i)
				cancel()
				if err != nil {
					errN.Add(1)
					time.Sleep(10 * time.Millisecond) // not a spin against a dead member
					continue
				}
				okN.Add(1)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	time.Sleep(2 * time.Second) // the load is running
	row := failoverRow{Workload: "w3-failover", Clients: clients, Trials: trials}
	for t := range trials {
		li, err := leader(l, -1)
		if err != nil {
			return row, err
		}
		killed := time.Now()
		if err := l.Kill(li); err != nil {
			return row, err
		}
		ok := false
		for time.Since(killed) < 30*time.Second && !ok {
			for i, c := range conns {
				if i == li {
					continue
				}
				probe := cs.data.current(probe)
				pos := nextPosition()
				pctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				resp, err := coordpb.NewDataCoordClient(c).UpdateChannelCheckpoints(pctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: probe.node,
					Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: probe.name, PchannelTerm: probe.term,
						Position: &coordpb.Position{Term: probe.term, Offset: pos - positionBase, Timestamp: pos}}}})
				cancel()
				if err == nil && resp.Accepted == 1 {
					ok = true
					break
				}
				if err == nil {
					err = fmt.Errorf("refused: %v", resp.Refused)
				}
				cs.data.refused(c, err)
			}
			if !ok {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if !ok {
			return row, fmt.Errorf("trial %d: no committed write within 30 s of the kill", t+1)
		}
		row.TrialsMs = append(row.TrialsMs, msOf(time.Since(killed)))
		if err := l.StartMember(li); err != nil {
			return row, err
		}
		rctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err = l.WaitReady(rctx, li, 60*time.Second)
		cancel()
		if err != nil {
			return row, err
		}
		time.Sleep(2 * time.Second) // the restarted member catches up before the next kill
	}
	sorted := append([]float64(nil), row.TrialsMs...)
	sort.Float64s(sorted)
	row.MedianMs, row.MaxMs = median(sorted), sorted[len(sorted)-1]
	row.P99Ms = sorted[min(len(sorted)-1, int(0.99*float64(len(sorted))))]
	row.LoadOK, row.LoadFails = okN.Load(), errN.Load()
	return row, nil
}
