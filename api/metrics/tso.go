package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tsoCollector exports the timestamp oracle's lead over the clock while
// this member serves timestamps.
type tsoCollector struct {
	skew func() (time.Duration, bool)
	desc *prometheus.Desc
}

// RegisterTSOSkew exports coordd_tso_skew_seconds: the physical part of the
// newest timestamp minus the wall clock, on the leader (absent elsewhere).
// A value growing past a few seconds means the oracle runs into the future.
func (r *Registry) RegisterTSOSkew(skew func() (time.Duration, bool)) error {
	return r.reg.Register(&tsoCollector{skew: skew, desc: prometheus.NewDesc("coordd_tso_skew_seconds",
		"Physical part of the newest timestamp minus the wall clock (leader only; positive: ahead).", nil, nil)})
}

func (c *tsoCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *tsoCollector) Collect(ch chan<- prometheus.Metric) {
	if d, ok := c.skew(); ok {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, d.Seconds())
	}
}
