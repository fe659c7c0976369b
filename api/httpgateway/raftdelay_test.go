package httpgateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeDelays records what the gateway asks of a member's fault hook.
type fakeDelays struct{ set *map[string]time.Duration }

func (f fakeDelays) SetRaftDelay(kind string, d time.Duration) error {
	if kind == "bogus" {
		return errors.New("unknown raft RPC kind")
	}
	if f.set != nil {
		(*f.set)[kind] = d
	}
	return nil
}

func (f fakeDelays) RaftDelays() map[string]time.Duration {
	if f.set == nil {
		return nil
	}
	return *f.set
}

// TestRaftDelayRoute: /debug/raft-delay is 404 without fault injection;
// with it, a valid POST sets the delay and answers the delays in force, and
// bad input is a 400 that changes nothing.
func TestRaftDelayRoute(t *testing.T) {
	off := New(shared.srv, Probes{Node: shared.node}, shared.metrics.Handler())
	rec := httptest.NewRecorder()
	off.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/debug/raft-delay", strings.NewReader(`{"kind":"timeout_now","delay_ms":5}`)))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("without fault injection: %d, want 404", rec.Code)
	}
	set := map[string]time.Duration{}
	g := New(shared.srv, Probes{Node: shared.node}, shared.metrics.Handler(), WithFaultInjection(fakeDelays{&set}))
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"kind":"timeout_now","delay_ms":1500}`, http.StatusOK},
		{`{"kind":"bogus","delay_ms":5}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","delay_ms":-1}`, http.StatusBadRequest},
		{`{"kind":"heartbeat","delay_ms":5,"extra":1}`, http.StatusBadRequest},
		{`not json`, http.StatusBadRequest},
	} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/debug/raft-delay", strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		g.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("POST %s: %d %s, want %d", tc.body, rec.Code, rec.Body, tc.code)
		}
	}
	if len(set) != 1 || set["timeout_now"] != 1500*time.Millisecond {
		t.Fatalf("delays set: %v, want only timeout_now=1.5s", set)
	}
	rec = httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/raft-delay", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"timeout_now":1500`) {
		t.Fatalf("GET: %d %s", rec.Code, rec.Body)
	}
}
