package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/proc"
)

// The probe: one committed write (a checkpoint of one VChannel the load
// leaves alone) every 100 ms, its latency kept with its start time, so the
// longest stall of the apply path in a window (a snapshot, a GC pause, a
// backup stream) can be read off.

type probeLog struct {
	mu  sync.Mutex
	at  []time.Time
	lat []time.Duration
	st  opStats
}

func (p *probeLog) add(t0 time.Time, d time.Duration) {
	p.mu.Lock()
	p.at, p.lat = append(p.at, t0), append(p.lat, d)
	p.mu.Unlock()
	p.st.ok(d, 1)
}

func (p *probeLog) summary() summary { return p.st.summary() }

// maxBetween is the longest probe write that started in [from, to] or was
// still running at from.
func (p *probeLog) maxBetween(from, to time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var m time.Duration
	for i, t := range p.at {
		if t.Before(to) && t.Add(p.lat[i]).After(from) {
			m = max(m, p.lat[i])
		}
	}
	return m
}

// probeVChannel is the VChannel only the probe checkpoints.
func (e *env) probeVChannel() string {
	pcs := sortedKeys(e.seed.ByPChannel)
	return e.seed.ByPChannel[pcs[0]][0]
}

func (e *env) probe(ctx context.Context, p *probeLog) {
	vch := e.probeVChannel()
	for ctx.Err() == nil {
		if o, ok := e.ownerOf(vch); ok {
			t := nextPosition()
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			t0 := time.Now()
			resp, err := coordpb.NewDataCoordClient(e.leaderConn()).UpdateChannelCheckpoints(cctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: o.node,
				Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: vch, PchannelTerm: o.term, Position: &coordpb.Position{Term: o.term, Offset: t >> 10, Timestamp: t}}}})
			cancel()
			switch {
			case ctx.Err() != nil:
			case err != nil:
				p.st.fail(err)
				e.refused(ctx, err)
			case len(resp.Refused) > 0:
				p.st.fail(fmt.Errorf("probe checkpoint refused: %s", resp.Refused[0]))
				e.refused(ctx, fmt.Errorf("%s", resp.Refused[0]))
			default:
				p.add(t0, time.Since(t0))
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// saveSnapshot streams a backup (SaveSnapshot) from the leader and
// discards it, returning its size.
func (e *env) saveSnapshot(ctx context.Context) (int64, error) {
	st, err := coordpb.NewBackupClient(e.leaderConn()).SaveSnapshot(ctx, &coordpb.SaveSnapshotRequest{})
	if err != nil {
		return 0, err
	}
	var n int64
	for {
		c, err := st.Recv()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		n += int64(len(c.GetData()))
	}
}

// loadAvg is /proc/loadavg's first three fields.
func loadAvg() string { return proc.LoadAvg() }
