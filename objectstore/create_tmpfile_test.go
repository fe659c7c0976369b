//go:build linux

package objectstore

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Creates leave nothing but the objects in their directory (no temporary
// name survives, on either path), the objects hold their bytes with the
// mode the named path always gave them (0600), and the unnamed path is
// the one taken where the file system has O_TMPFILE.
func TestCreateLeavesOnlyTheObjects(t *testing.T) {
	for _, named := range []bool{false, true} {
		root := t.TempDir()
		st, err := Open(context.Background(), "file://"+root)
		if err != nil {
			t.Fatal(err)
		}
		b := st.(*bucket)
		b.noTmpfile.Store(named)
		for _, k := range []string{"m/1/manifest-1", "m/1/manifest-2", "m/2/manifest-1"} {
			if err := st.Create(context.Background(), k, []byte(k)); err != nil {
				t.Fatalf("named=%v: create %s: %v", named, k, err)
			}
		}
		if err := st.Create(context.Background(), "m/1/manifest-2", []byte("again")); err == nil {
			t.Fatalf("named=%v: a second create of m/1/manifest-2 succeeded", named)
		}
		if !named && b.noTmpfile.Load() && runtimeHasTmpfile() {
			t.Fatal("the unnamed path fell back to named temporary files")
		}
		for dir, want := range map[string][]string{"m/1": {"manifest-1", "manifest-2"}, "m/2": {"manifest-1"}} {
			ents, err := os.ReadDir(filepath.Join(root, dir))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range ents {
				got = append(got, e.Name())
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Fatalf("named=%v: %s/%s has mode %v, want 0600", named, dir, e.Name(), fi.Mode().Perm())
				}
				data, err := os.ReadFile(filepath.Join(root, dir, e.Name()))
				if err != nil || string(data) != dir+"/"+e.Name() {
					t.Fatalf("named=%v: %s/%s holds %q (%v)", named, dir, e.Name(), data, err)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("named=%v: %s holds %v, want %v", named, dir, got, want)
			}
		}
		st.Close()
	}
}

// runtimeHasTmpfile: this machine's temporary directory takes O_TMPFILE
// (linkTmpfile would not answer errNoTmpfile).
func runtimeHasTmpfile() bool {
	dir, err := os.MkdirTemp("", "tmpfile-probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(dir)
	return linkTmpfile(dir, filepath.Join(dir, "x"), nil) == nil
}

// BenchmarkCreate: one exclusive create of a small object in an existing
// directory, fsyncs included, by path; cpu-us/op is the process's user
// plus system CPU per create, measured on the benchmark's own thread so
// that nothing else in the process counts (ns/op is mostly waiting for
// the disk).
//
//	go test -tags hashicorpmetrics -run '^$' -bench Create -benchmem ./objectstore/
func BenchmarkCreate(b *testing.B) {
	for _, path := range []string{"unnamed", "named"} {
		b.Run(path, func(b *testing.B) {
			st, err := Open(context.Background(), "file://"+b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			st.(*bucket).noTmpfile.Store(path == "named")
			data := make([]byte, 300)
			if err := st.Create(context.Background(), "m/1/2/3/manifest-0", data); err != nil {
				b.Fatal(err)
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := threadCPU()
			i := 0
			for b.Loop() {
				i++
				if err := st.Create(context.Background(), "m/1/2/3/manifest-"+strconv.Itoa(i), data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((threadCPU()-cpu0).Microseconds())/float64(i), "cpu-us/op")
		})
	}
}

// threadCPU is the calling thread's user plus system CPU time so far.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
