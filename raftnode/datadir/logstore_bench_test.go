package datadir_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/raftnode/datadir"
)

// BenchmarkStoreLogs is the leader's and each follower's per-round storage
// cost in isolation: one StoreLogs of one entry (what one raft round with
// one entry in flight writes), on a log prefilled like a running member's
// (12,000 entries, then the first 8,000 deleted as a snapshot's compaction
// does, so bolt has a freelist to carry). Stores:
//   - bolt: raft-boltdb/v2 as coordd opens it (two fdatasyncs per append);
//   - bolt variants: bbolt's NoFreelistSync, hashmap freelist, and
//     preallocation (InitialMmapSize 64 MiB: bolt grows the file to its
//     mmap size on the first growth, so later commits rarely grow it and
//     pay the extra sync that growing costs);
//   - wal: raft-wal v0.4.2 (one fsync per append into a preallocated
//     segment);
//   - wal+log-reach, bolt+log-reach: the stores as a member writes them,
//     behind the LogReachFile writer (one more fdatasync per append,
//     overlapping the store's own).
//
// Every iteration appends one entry to each store in turn, so on a loaded
// machine they share the same conditions; each store's rate and latency
// are reported as <store>-appends/s, <store>-p50-ms and <store>-p99-ms.
// The figures are in bench/RESULTS.md.
func BenchmarkStoreLogs(b *testing.B) {
	bolts := []struct {
		name string
		opt  func(*bolt.Options)
	}{
		{"bolt", func(*bolt.Options) {}},
		{"bolt-NoFreelistSync", func(o *bolt.Options) { o.NoFreelistSync = true }},
		{"bolt-NoFreelistSync+map", func(o *bolt.Options) { o.NoFreelistSync, o.FreelistType = true, bolt.FreelistMapType }},
		{"bolt-InitialMmapSize64MiB", func(o *bolt.Options) { o.InitialMmapSize = 64 << 20 }},
	}
	for _, size := range []int{600, 6000} {
		b.Run(fmt.Sprintf("entry=%dB", size), func(b *testing.B) {
			type store struct {
				name string
				s    raft.LogStore
				lat  []time.Duration
			}
			var stores []*store
			for _, bc := range bolts {
				opts := &bolt.Options{Timeout: time.Second}
				bc.opt(opts)
				s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"), BoltOptions: opts})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				stores = append(stores, &store{name: bc.name, s: s})
			}
			w, err := raftwal.Open(b.TempDir(), raftwal.WithLogger(hclog.NewNullLogger()))
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			stores = append(stores, &store{name: "wal", s: w})
			w2, err := raftwal.Open(b.TempDir(), raftwal.WithLogger(hclog.NewNullLogger()))
			if err != nil {
				b.Fatal(err)
			}
			defer w2.Close()
			wr, err := datadir.WithLogReach(b.TempDir(), w2)
			if err != nil {
				b.Fatal(err)
			}
			stores = append(stores, &store{name: "wal+log-reach", s: wr})
			bo := &bolt.Options{Timeout: time.Second, NoFreelistSync: true, FreelistType: bolt.FreelistMapType}
			b2, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db"), BoltOptions: bo})
			if err != nil {
				b.Fatal(err)
			}
			defer b2.Close()
			br, err := datadir.WithLogReach(b.TempDir(), b2)
			if err != nil {
				b.Fatal(err)
			}
			stores = append(stores, &store{name: "bolt+log-reach", s: br})
			data := make([]byte, size)
			for i := range data {
				data[i] = byte(i)
			}
			const prefill, compact = 12000, 8000
			for _, st := range stores {
				prefillLog(b, st.s, data, prefill, compact)
				st.lat = make([]time.Duration, 0, b.N)
			}
			next := uint64(prefill + 1)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for _, st := range stores {
					t0 := time.Now()
					if err := st.s.StoreLogs([]*raft.Log{{Index: next, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: t0}}); err != nil {
						b.Fatal(err)
					}
					st.lat = append(st.lat, time.Since(t0))
				}
				next++
			}
			b.StopTimer()
			for _, st := range stores {
				reportLatency(b, st.name+"-", st.lat)
			}
		})
	}
}

// prefillLog stores n entries in batches of 100, then deletes the first
// compact of them.
func prefillLog(b *testing.B, s raft.LogStore, data []byte, n, compact uint64) {
	batch := make([]*raft.Log, 0, 100)
	for i := uint64(1); i <= n; i++ {
		batch = append(batch, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()})
		if len(batch) == cap(batch) {
			if err := s.StoreLogs(batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := s.DeleteRange(1, compact); err != nil {
		b.Fatal(err)
	}
}

func reportLatency(b *testing.B, prefix string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	b.ReportMetric(float64(len(lat))/sum.Seconds(), prefix+"appends/s")
	b.ReportMetric(float64(sorted[len(sorted)/2].Microseconds())/1000, prefix+"p50-ms")
	b.ReportMetric(float64(sorted[len(sorted)*99/100].Microseconds())/1000, prefix+"p99-ms")
}
