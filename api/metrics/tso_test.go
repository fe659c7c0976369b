package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestTSOSkewMetric(t *testing.T) {
	r := &Registry{reg: prometheus.NewRegistry()}
	skew, serving := 1500*time.Millisecond, true
	if err := r.RegisterTSOSkew(func() (time.Duration, bool) { return skew, serving }); err != nil {
		t.Fatal(err)
	}
	want := "# HELP coordd_tso_skew_seconds Physical part of the newest timestamp minus the wall clock (leader only; positive: ahead).\n" +
		"# TYPE coordd_tso_skew_seconds gauge\ncoordd_tso_skew_seconds 1.5\n"
	if err := testutil.GatherAndCompare(r.reg, strings.NewReader(want), "coordd_tso_skew_seconds"); err != nil {
		t.Fatal(err)
	}
	serving = false
	if n, err := testutil.GatherAndCount(r.reg, "coordd_tso_skew_seconds"); err != nil || n != 0 {
		t.Fatalf("a member serving no timestamps exports %d skew samples (%v), want none", n, err)
	}
}
