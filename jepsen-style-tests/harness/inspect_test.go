package harness

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestSnapshotTimeoutOutlastsTheStatusCap: a snapshot body that takes
// longer than the status client's cap is cut without SnapshotTimeout (as
// before, for every small state) and read whole with it (a large state).
func TestSnapshotTimeoutOutlastsTheStatusCap(t *testing.T) {
	body := strings.Repeat("s", 1<<16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body[:len(body)/2])
		w.(http.Flusher).Flush()
		time.Sleep(400 * time.Millisecond)
		_, _ = io.WriteString(w, body[len(body)/2:])
	}))
	defer srv.Close()
	for _, c := range []struct {
		limit time.Duration
		whole bool
	}{{0, false}, {5 * time.Second, true}} {
		cl := &Cluster{cfg: Config{SnapshotTimeout: c.limit}, members: []Member{{ID: "n1", HTTPAddr: strings.TrimPrefix(srv.URL, "http://")}},
			http: &http.Client{Timeout: 200 * time.Millisecond}, bulk: &http.Client{}, scheme: "http://"}
		b, err := cl.Snapshot(context.Background(), 0)
		if got := err == nil && string(b) == body; got != c.whole {
			t.Fatalf("SnapshotTimeout %v: read whole %v (%d bytes, err %v), want %v", c.limit, got, len(b), err, c.whole)
		}
	}
}
