package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/binlog"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/objectstore"
)

// Flush is the write-path workload: inserters write rows through the
// streaming nodes (client.Insert), a flusher client calls Flush and polls
// GetFlushState, a poller reads channel checkpoints. When the load stops
// (after the heal), a final flush waits until everything is persisted and
// the rows of every Flushed segment are read back from the object store.
// Checkers: every acknowledged row is in exactly one Flushed segment, no
// row is persisted twice, GetFlushState is never true while a VChannel's
// checkpoint is below flush_ts, checkpoints never move back.
type Flush struct {
	NInserters int // default 3
	Rows       int // rows per insert (default 40)
	Shards     int // VChannels of the collection (default 2)
	// FinalWait bounds the final flush and read-back after the run
	// (default 90 s).
	FinalWait time.Duration
}

func (f *Flush) defaults() {
	if f.NInserters <= 0 {
		f.NInserters = 3
	}
	if f.Rows <= 0 {
		f.Rows = 40
	}
	if f.Shards <= 0 {
		f.Shards = 2
	}
	if f.FinalWait <= 0 {
		f.FinalWait = 90 * time.Second
	}
}

func (f *Flush) Name() string { return "flush" }

// Clients: the inserters, the flusher, the checkpoint poller, the final reader.
func (f *Flush) Clients() int { f.defaults(); return f.NInserters + 3 }

func (f *Flush) Run(ctx context.Context, env Env) error {
	f.defaults()
	if env.WALDir == "" {
		return fmt.Errorf("the flush workload needs streaming nodes")
	}
	cl, err := client.New(ctx, env.ClientConfig(RoleProxy, env.Endpoints(0)))
	if err != nil {
		return err
	}
	defer cl.Close()
	coll := int64(1000 + env.Seed%100000)
	// The collection exists before any traffic (retried through faults).
	for {
		_, err := cl.AllocVirtualChannels(ctx, coll, uint32(f.Shards), fmt.Sprintf("flush-workload-%d", coll))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := 0; i < f.NInserters; i++ {
		id := env.ClientBase + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.New(ctx, env.ClientConfig(RoleProxy, env.Endpoints(i%env.Members)))
			if err != nil {
				return
			}
			defer c.Close()
			for ctx.Err() == nil {
				p := env.Recorder.Invoke(id, checker.FInsert, map[string]int{"rows": f.Rows})
				res, err := c.Insert(ctx, coll, 0, uint32(f.Rows), 0)
				switch Classify(err) {
				case history.Ok:
					p.Ok(checker.InsertOut{First: res.FirstPK, Last: res.LastPK})
				case history.Fail:
					p.Fail(err)
				default:
					p.Info(err)
				}
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(env.Seed, 7))
		for ctx.Err() == nil {
			f.flushOnce(ctx, cl, env.Recorder, env.ClientBase+f.NInserters, coll, 10*time.Second)
			sleepCtx(ctx, time.Duration(500+rng.IntN(1500))*time.Millisecond)
		}
	}()
	go func() {
		defer wg.Done()
		id := env.ClientBase + f.NInserters + 1
		for ctx.Err() == nil {
			p := env.Recorder.Invoke(id, checker.FCheckpoints, nil)
			cps, err := cl.ListChannelCheckpoints(ctx, coll)
			if err != nil {
				p.Info(err)
			} else {
				p.Ok(cpMap(cps))
			}
			sleepCtx(ctx, 200*time.Millisecond)
		}
	}()
	wg.Wait()

	// The run is over and the cluster healed: flush what is left and read
	// back everything persisted.
	fctx, cancel := context.WithTimeout(context.Background(), f.FinalWait)
	defer cancel()
	fin, err := client.New(fctx, env.Config(RoleProxy, client.Config{Endpoints: env.Endpoints(0), RequestTimeout: 10 * time.Second}))
	if err != nil {
		return err
	}
	defer fin.Close()
	id := env.ClientBase + f.NInserters + 2
	for fctx.Err() == nil {
		if f.flushOnce(fctx, fin, env.Recorder, id, coll, 30*time.Second) {
			break
		}
	}
	p := env.Recorder.Invoke(id, checker.FFinalRead, nil)
	out, err := readPersisted(fctx, fin, filepath.Join(filepath.Dir(env.WALDir), "objects"), coll)
	if err != nil {
		p.Info(err)
		return nil
	}
	p.Ok(out)
	return nil
}

// flushOnce flushes coll and polls GetFlushState for up to wait; it
// reports whether the flush completed.
func (f *Flush) flushOnce(ctx context.Context, cl *client.Client, rec *history.Recorder, id int, coll int64, wait time.Duration) bool {
	p := rec.Invoke(id, checker.FFlush, nil)
	resp, err := cl.Flush(ctx, coll)
	if err != nil {
		if Classify(err) == history.Fail {
			p.Fail(err)
		} else {
			p.Info(err)
		}
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	out := checker.FlushOut{FlushTs: resp.FlushTs}
	st, err := cl.WaitFlushed(wctx, resp, 100*time.Millisecond, nil)
	if err == nil && st.Flushed {
		out.Flushed = true
		if cps, err := cl.ListChannelCheckpoints(ctx, coll); err == nil {
			out.Checkpoints = cpMap(cps)
		}
	}
	p.Ok(out)
	return out.Flushed
}

func cpMap(cps []*coordpb.ChannelCheckpoint) map[string]uint64 {
	m := map[string]uint64{}
	for _, cp := range cps {
		m[cp.Vchannel] = cp.GetPosition().GetTimestamp()
	}
	return m
}

// readPersisted reads the binlogs of every Flushed segment of coll.
func readPersisted(ctx context.Context, cl *client.Client, storeURL string, coll int64) (checker.FinalRead, error) {
	out := checker.FinalRead{Counts: map[int64]int{}}
	store, err := objectstore.Open(ctx, storeURL)
	if err != nil {
		return out, err
	}
	defer store.Close()
	segs, err := cl.ListSegments(ctx, &coordpb.ListSegmentsRequest{CollectionId: coll, State: "Flushed"})
	if err != nil {
		return out, err
	}
	for _, s := range segs {
		info, err := cl.GetSegmentInfo(ctx, []int64{s.SegmentId}, false)
		if err != nil {
			return out, err
		}
		out.Segments++
		for _, path := range info.Segments[0].BinlogPaths {
			data, err := store.Get(ctx, path)
			if err != nil {
				return out, err
			}
			obj, err := binlog.Decode(data)
			if err != nil {
				return out, fmt.Errorf("%s: %w", path, err)
			}
			for _, r := range obj.Rows {
				out.Counts[r.PK]++
			}
		}
	}
	return out, nil
}

func (f *Flush) Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result {
	return []checker.Result{checker.FlushExactlyOnce(ops), checker.FlushStateVsCheckpoints(ops), checker.CheckpointsMonotonic(ops)}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
