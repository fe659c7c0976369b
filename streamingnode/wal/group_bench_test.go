package wal

import (
	"runtime"
	"testing"
)

// BenchmarkAppend64 is 64 concurrent appenders on one PChannel, each
// taking its timestamp and enqueueing under one lock (as the streaming
// node's slot does) and waiting for durability outside it: "one-fsync-per-
// append" is the writer before group commit (batches of one record),
// "group-commit" the default. Sub-benchmarks run one after another; use
// -count=N to interleave them. Figures in bench/RESULTS.md.
func BenchmarkAppend64(b *testing.B) {
	for _, tc := range []struct {
		name     string
		maxBatch int
	}{{"one-fsync-per-append", 1}, {"group-commit", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			w, err := Open(b.TempDir(), pch, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			w.maxBatch = tc.maxBatch
			payload := make([]byte, 200)
			var seq sequencer
			b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, _, err := seq.enqueue(w, vchA, payload, 0)
					if err == nil {
						_, err = p.Wait()
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/float64(max(w.syncs.Load(), 1)), "appends/fsync")
		})
	}
}
