package flusher

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/testutil"
)

// failingStore fails the first n Puts.
type failingStore struct {
	objectstore.Store
	n atomic.Int32
}

func (s *failingStore) Put(ctx context.Context, key string, data []byte) error {
	if s.n.Add(-1) >= 0 {
		return errors.New("injected object store failure")
	}
	return s.Store.Put(ctx, key, data)
}

// scrape gathers reg: metric name -> label value (first label, "" when
// none) -> value (counter, gauge, or a histogram's sample count).
func scrape(t *testing.T, reg *prometheus.Registry) map[string]map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range fams {
		out[f.GetName()] = map[string]float64{}
		for _, m := range f.Metric {
			label := ""
			if len(m.Label) > 0 {
				label = m.Label[0].GetValue()
			}
			out[f.GetName()][label] = testutil.SampleValue(m)
		}
	}
	return out
}

// The flusher's metrics count binlogs, bytes and rows by kind, time
// flushes, show what is buffered and pending, and count errors by class.
func TestFlusherMetrics(t *testing.T) {
	r := newRigWith(t, "", func(c *Config) {
		fs := &failingStore{Store: c.Store}
		fs.n.Store(1)
		c.SaveBytes, c.Store = 3*rowBytes, fs
	})
	reg := prometheus.NewRegistry()
	for _, c := range r.m.Collectors() {
		reg.MustRegister(c)
	}
	before := scrape(t, reg)
	for _, name := range []string{"coordd_flusher_binlogs_written_total", "coordd_flusher_binlog_bytes_written_total",
		"coordd_flusher_rows_written_total", "coordd_flusher_flush_duration_seconds", "coordd_flusher_save_duration_seconds",
		"coordd_flusher_errors_total", "coordd_flusher_pending_segments", "coordd_flusher_pending_flush_tasks", "coordd_flusher_buffered_rows"} {
		if _, ok := before[name]; !ok {
			t.Fatalf("metric %s missing before any flush: %v", name, before)
		}
	}
	v := testP + "_1v0"
	r.coord.segment(10, 1, v)
	r.coord.segment(11, 1, v)
	r.insert(1, 11, 100) // below the threshold: stays buffered
	r.insert(1, 10, 1, 2, 3)
	// The first write fails (object_store), the flusher recovers and saves.
	r.waitFor("the partial save", func() bool { return r.seg(10).rows == 3 })
	r.waitFor("one segment pending", func() bool {
		m := scrape(t, reg)
		return m["coordd_flusher_pending_segments"][""] == 1 && m["coordd_flusher_buffered_rows"][""] == 1
	})
	r.insert(1, 10, 4)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	r.waitFor("the flush observed", func() bool { return scrape(t, reg)["coordd_flusher_flush_duration_seconds"][""] == 1 })
	m := scrape(t, reg)
	if m["coordd_flusher_binlogs_written_total"]["partial"] != 1 || m["coordd_flusher_binlogs_written_total"]["flush"] != 1 {
		t.Fatalf("binlogs written %v", m["coordd_flusher_binlogs_written_total"])
	}
	if m["coordd_flusher_rows_written_total"]["partial"] != 3 || m["coordd_flusher_rows_written_total"]["flush"] != 1 {
		t.Fatalf("rows written %v", m["coordd_flusher_rows_written_total"])
	}
	if m["coordd_flusher_binlog_bytes_written_total"]["partial"] <= 0 || m["coordd_flusher_binlog_bytes_written_total"]["flush"] <= 0 {
		t.Fatalf("bytes written %v", m["coordd_flusher_binlog_bytes_written_total"])
	}
	if m["coordd_flusher_save_duration_seconds"]["partial"] != 1 || m["coordd_flusher_save_duration_seconds"]["flush"] != 1 {
		t.Fatalf("save durations %v", m["coordd_flusher_save_duration_seconds"])
	}
	if m["coordd_flusher_errors_total"]["object_store"] != 1 || m["coordd_flusher_errors_total"]["save_binlogs"] != 0 {
		t.Fatalf("errors %v", m["coordd_flusher_errors_total"])
	}
	if m["coordd_flusher_pending_flush_tasks"][""] != 0 {
		t.Fatalf("pending tasks %v", m["coordd_flusher_pending_flush_tasks"])
	}
}
