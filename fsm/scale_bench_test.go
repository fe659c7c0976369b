package fsm

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/testutil"
)

// scaleCases are the shapes of BenchmarkStateScale: segments growing by
// 10× (one VChannel per 10 segments, so 1M segments come with 100k
// VChannels), VChannels and tombstones alone, and everything at once.
var scaleCases = []struct {
	name  string
	shape SyntheticShape
}{
	{"segments=10k", SyntheticShape{Segments: 10_000}},
	{"segments=100k", SyntheticShape{Segments: 100_000}},
	{"segments=1M", SyntheticShape{Segments: 1_000_000}},
	{"vchannels=100k", SyntheticShape{VChannels: 100_000}},
	{"tombstones=8192", SyntheticShape{VChannels: 64, Tombstones: 8192}},
	{"all=1M+100k+8192", SyntheticShape{Segments: 1_000_000, Tombstones: 8192}},
}

// liveHeap is the heap still reachable after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkStateScale reports, per shape, the live heap the state costs
// (per VChannel, segment and tombstone), the snapshot's size, the time to
// write it to a file with fsync and to restore it with the original
// dropped first (as on a restarting node), and the process's peak. Run
// with -benchtime=1x; the figures are in bench/RESULTS.md and
// docs/scaling.md.
func BenchmarkStateScale(b *testing.B) {
	for _, tc := range scaleCases {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchScaleOnce(b, tc.shape)
			}
		})
	}
}

func benchScaleOnce(b *testing.B, shape SyntheticShape) {
	h0 := liveHeap()
	s, err := syntheticChannels(shape)
	if err != nil {
		b.Fatal(err)
	}
	h1 := liveHeap()
	s.addSyntheticSegments(shape.Segments)
	h2 := liveHeap()
	s.addSyntheticTombstones(shape.Tombstones)
	h3 := liveHeap()
	if err := s.CheckInvariants(); err != nil {
		b.Fatal(err)
	}
	segs, tombs := s.SegmentCount(), s.TombstoneCount()
	vchs := 4 * len(s.Collections())

	path := filepath.Join(b.TempDir(), "snap")
	start, cpu := time.Now(), testutil.CPUTime()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.WriteSnapshot(f); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	write, writeCPU := time.Since(start), testutil.CPUTime()-cpu
	s = nil
	runtime.GC()
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	f, err = os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	start, cpu = time.Now(), testutil.CPUTime()
	r, err := ReadSnapshot(bufio.NewReaderSize(f, 1<<20))
	restore, restoreCPU := time.Since(start), testutil.CPUTime()-cpu
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	if r.SegmentCount() != segs || r.TombstoneCount() != tombs {
		b.Fatalf("restored %d segments and %d tombstones, want %d and %d", r.SegmentCount(), r.TombstoneCount(), segs, tombs)
	}
	restored := liveHeap()
	b.ReportMetric(float64(h3-h0)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(restored-h0)/(1<<20), "restored-heap-MiB")
	per := func(bytes uint64, n int, unit string) {
		if n > 0 {
			b.ReportMetric(float64(bytes)/float64(n), unit)
		}
	}
	per(h1-h0, vchs, "heap-B/vchannel")
	per(h2-h1, segs, "heap-B/segment")
	per(h3-h2, tombs, "heap-B/tombstone")
	b.ReportMetric(float64(fi.Size())/(1<<20), "snapshot-MiB")
	b.ReportMetric(write.Seconds(), "write-s")
	b.ReportMetric(restore.Seconds(), "restore-s")
	b.ReportMetric(writeCPU.Seconds(), "write-cpu-s")
	b.ReportMetric(restoreCPU.Seconds(), "restore-cpu-s")
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
	if rss, ok := vmRSS(); ok {
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB")
	}
	runtime.KeepAlive(r)
}

// vmRSS reads the process's resident set from /proc (Linux only).
func vmRSS() (uint64, bool) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	var kb uint64
	for _, line := range strings.Split(string(data), "\n") {
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &kb); err == nil {
			return kb << 10, true
		}
	}
	return 0, false
}
