package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
)

// flushCell is the flush latency for one collection shape: Flush called,
// then GetFlushState polled every 20 ms until it says flushed, while
// inserters keep writing to the same collection.
type flushCell struct {
	VChannels    int       `json:"vchannels"`
	Trials       int       `json:"trials"`
	MedianMs     float64   `json:"median_ms"`
	MaxMs        float64   `json:"max_ms"`
	TrialsMs     []float64 `json:"trials_ms"`
	RowsInserted int64     `json:"rows_inserted"`
	InsertErrors int64     `json:"insert_errors"`
}

// flushLatency measures Flush -> GetFlushState true for a collection with
// 1 VChannel and one with 64, each under a steady insert load of two
// closed-loop inserters (200 rows per call) on that collection.
func flushLatency(l *cluster.Launcher, trials int) (result, []flushCell, error) {
	c, err := newClient(l)
	if err != nil {
		return result{}, nil, err
	}
	defer c.Close()
	if _, err := waitSettled(c, 0, 60*time.Second); err != nil {
		return result{}, nil, err
	}
	var cells []flushCell
	for _, shards := range []int{1, 64} {
		coll := int64(5000 + shards)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := c.AllocVirtualChannels(ctx, coll, uint32(shards), "")
		cancel()
		if err != nil {
			return result{}, nil, fmt.Errorf("collection with %d vchannels: %w", shards, err)
		}
		cell, err := flushTrials(l, c, coll, shards, trials)
		if err != nil {
			return result{}, nil, err
		}
		fmt.Fprintf(os.Stderr, "coordbench: flush, %d vchannels: median %.0f ms, max %.0f ms\n", shards, cell.MedianMs, cell.MaxMs)
		cells = append(cells, cell)
	}
	return result{Trials: trials}, cells, nil
}

func flushTrials(l *cluster.Launcher, c *client.Client, coll int64, shards, trials int) (flushCell, error) {
	cell := flushCell{VChannels: shards, Trials: trials}
	loadCtx, stopLoad := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var rows, errs atomic.Int64
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ic, err := newClient(l)
			if err != nil {
				return
			}
			defer ic.Close()
			for loadCtx.Err() == nil {
				res, err := ic.Insert(loadCtx, coll, 0, 200, 0)
				if err != nil {
					errs.Add(1)
					continue
				}
				rows.Add(int64(res.Count))
			}
		}()
	}
	defer func() { stopLoad(); wg.Wait() }()
	time.Sleep(time.Second) // the load is running before the first flush
	for t := 0; t < trials; t++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		start := time.Now()
		f, err := c.Flush(ctx, coll)
		if err == nil {
			_, err = c.WaitFlushed(ctx, f, 20*time.Millisecond, nil)
		}
		cancel()
		if err != nil {
			return cell, fmt.Errorf("flush trial %d (%d vchannels): %w", t, shards, err)
		}
		cell.TrialsMs = append(cell.TrialsMs, float64(time.Since(start).Microseconds())/1000)
	}
	stopLoad()
	wg.Wait()
	cell.RowsInserted, cell.InsertErrors = rows.Load(), errs.Load()
	sorted := append([]float64(nil), cell.TrialsMs...)
	sort.Float64s(sorted)
	cell.MedianMs, cell.MaxMs = sorted[len(sorted)/2], sorted[len(sorted)-1]
	return cell, nil
}
