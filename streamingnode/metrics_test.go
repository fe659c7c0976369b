package streamingnode

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// The node serves its own and the flusher's metrics over HTTP when asked
// (--metrics-addr); a scrape lists every flusher series from the start.
func TestMetricsEndpointScrape(t *testing.T) {
	f := startFakeCoord(t)
	dir := t.TempDir()
	n := startNode(t, f, dir, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	if err := n.assign(t, pch, 2, 3); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + n.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %d %v", resp.StatusCode, err)
	}
	text := string(body)
	for _, want := range []string{
		`coordd_flusher_binlogs_written_total{kind="flush"} 0`,
		`coordd_flusher_binlogs_written_total{kind="partial"} 0`,
		`coordd_flusher_binlog_bytes_written_total{kind="flush"} 0`,
		`coordd_flusher_flush_duration_seconds_count 0`,
		`coordd_flusher_save_duration_seconds_count{kind="partial"} 0`,
		`coordd_flusher_errors_total{class="object_store"} 0`,
		`coordd_flusher_pending_segments `,
		`coordd_flusher_pending_flush_tasks `,
		`coordd_streamingnode_pchannels_held 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	// Without the option there is no endpoint.
	if m := startNode(t, f, t.TempDir(), nil).MetricsAddr(); m != "" {
		t.Fatalf("metrics served on %s without --metrics-addr", m)
	}
}
