package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coordd/coordd/proc"
)

// scrape reads a Prometheus text page into name{labels} -> value.
func scrape(httpAddr string) (map[string]float64, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// rssMiB is a process's resident set in MiB (0 when it cannot be read).
func rssMiB(pid int) float64 {
	b, err := proc.RSSBytes(pid)
	if err != nil {
		return 0
	}
	return float64(b) / (1 << 20)
}

// rssSampler records each process's largest RSS every 250 ms until stop.
type rssSampler struct {
	mu   sync.Mutex
	max  map[string]float64
	stop chan struct{}
	done chan struct{}
}

func sampleRSS(read func() map[string]float64) *rssSampler {
	s := &rssSampler{max: map[string]float64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			for k, v := range read() {
				s.mu.Lock()
				s.max[k] = max(s.max[k], v)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *rssSampler) result() map[string]float64 {
	close(s.stop)
	<-s.done
	out := map[string]float64{}
	for k, v := range s.max {
		out[k] = float64(int(v*10)) / 10
	}
	return out
}

// diskFlushes is the "flushes completed" counter of the block device
// holding dir (/proc/diskstats, the 16th statistic; kernels >= 5.5):
// every fsync/fdatasync that reaches the disk, from any process.
func diskFlushes(dir string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return 0, err
	}
	major, minor := (st.Dev>>8)&0xfff, (st.Dev&0xff)|((st.Dev>>12)&0xfff00)
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return 0, err
	}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Fields(ln)
		if len(f) >= 20 && f[0] == strconv.FormatUint(major, 10) && f[1] == strconv.FormatUint(minor, 10) {
			return strconv.ParseUint(f[18], 10, 64)
		}
	}
	return 0, fmt.Errorf("no diskstats flush counter for device %d:%d", major, minor)
}

// fsyncRate measures the data directory's disk: 4 KiB appended and
// fdatasync'ed, at most n times or for d, whichever ends first.
func fsyncRate(dir string, n int, d time.Duration) (float64, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	start := time.Now()
	i := 0
	for ; i < n && time.Since(start) < d; i++ {
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
	}
	return float64(i) / time.Since(start).Seconds(), nil
}
