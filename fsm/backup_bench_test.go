package fsm_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/fsm"
)

// BenchmarkBackupFile is what `coordctl snapshot save`, `coordctl snapshot
// inspect` and `coordd restore` cost on a large state, without the network:
// writing a backup file (state stream, SHA-256, header rewrite, read-back
// for the checksum, fsync), verifying it, summarizing its tables, and
// decoding it as a restoring member does. Run with -benchtime=1x; the
// figures are in bench/RESULTS.md.
func BenchmarkBackupFile(b *testing.B) {
	for _, n := range []int{100_000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				st := fsm.BenchSegmentState(b, n)
				path := filepath.Join(b.TempDir(), "backup.snap")
				start := time.Now()
				f, err := os.Create(path)
				if err != nil {
					b.Fatal(err)
				}
				w, err := backup.NewWriter(f, backup.Header{ClusterID: "bench", Index: st.AppliedIndex() + 1, Term: 3})
				if err != nil {
					b.Fatal(err)
				}
				if err := st.WriteSnapshot(w); err != nil {
					b.Fatal(err)
				}
				if _, _, err := w.Finish(); err != nil {
					b.Fatal(err)
				}
				f.Close()
				write := time.Since(start)
				st = nil
				runtime.GC()

				start = time.Now()
				bf, err := backup.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				verify := time.Since(start)
				start = time.Now()
				sum, err := backup.Summarize(bf.Body())
				if err != nil {
					b.Fatal(err)
				}
				summarize := time.Since(start)
				start = time.Now()
				r, err := backup.Validate(bf.Body())
				if err != nil {
					b.Fatal(err)
				}
				restore := time.Since(start)
				bf.Close()
				if r.SegmentCount() != n || sum.Table("segment").Count != n {
					b.Fatalf("restored %d segments, summarized %d, want %d", r.SegmentCount(), sum.Table("segment").Count, n)
				}
				fi, _ := os.Stat(path)
				b.ReportMetric(float64(fi.Size())/(1<<20), "file-MiB")
				b.ReportMetric(write.Seconds(), "write-s")
				b.ReportMetric(verify.Seconds(), "verify-s")
				b.ReportMetric(summarize.Seconds(), "summarize-s")
				b.ReportMetric(restore.Seconds(), "restore-s")
			}
		})
	}
}
