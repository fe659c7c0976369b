package statuspage

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestVerdictStateBudget: the verdict stays healthy under 90 % of the
// memory guard's budget (and with the guard off), is degraded naming the
// state's size against the budget from 90 %, and says what is refused once
// over it.
func TestVerdictStateBudget(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name          string
		bytes, budget int64
		level         string
		want          string
	}{
		{"guard off", 100 * gib, 0, levelHealthy, ""},
		{"under 90 %", 8 * gib, 10 * gib, levelHealthy, ""},
		{"at 90 %", 9 * gib, 10 * gib, levelDegraded, "state at 9.0 GiB of budget 10.0 GiB (90%): near the budget"},
		{"over", 11 * gib, 10 * gib, levelDegraded, "state at 11.0 GiB of budget 10.0 GiB (110%): over the budget, the memory guard refuses new collections"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Handler{Source: healthySource(), Peer: allPeersUp, Now: func() time.Time { return fixedNow },
				StateSize: func() (int64, int64) { return tc.bytes, tc.budget }}
			v := gather(context.Background(), h)
			all := strings.Join(v.Verdict.Reasons, "; ")
			if v.Verdict.Level != tc.level || !strings.Contains(all, tc.want) || tc.want == "" && all != "" {
				t.Fatalf("verdict %s %q, want %s with %q", v.Verdict.Level, all, tc.level, tc.want)
			}
			if _, body := get(t, h, "/ui?refresh=0"); tc.want != "" && !strings.Contains(body, "state at ") {
				t.Fatalf("page does not show the state's size against the budget")
			}
		})
	}
}
