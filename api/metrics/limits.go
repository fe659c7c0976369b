package metrics

import "github.com/prometheus/client_golang/prometheus"

// Limit is one resource bound of a member, as a scrape sees it.
type Limit struct {
	Name    string  // e.g. "http_connections"
	Max     float64 // the configured bound
	InUse   float64 // how much of it is used now (-1: not measured)
	Refused uint64  // how many requests the bound refused or cut
}

type limitCollector struct {
	src                  func() []Limit
	maxD, inUseD, refusD *prometheus.Desc
}

// RegisterLimits exports each bound src reports: coordd_limit_max,
// coordd_limit_in_use and coordd_limit_refused_total, labelled by limit.
func (r *Registry) RegisterLimits(src func() []Limit) error {
	return r.reg.Register(&limitCollector{src: src,
		maxD:   prometheus.NewDesc("coordd_limit_max", "A configured resource bound of this member.", []string{"limit"}, nil),
		inUseD: prometheus.NewDesc("coordd_limit_in_use", "How much of a resource bound is in use now.", []string{"limit"}, nil),
		refusD: prometheus.NewDesc("coordd_limit_refused_total", "Requests or connections a resource bound refused or cut.", []string{"limit"}, nil),
	})
}

func (c *limitCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.maxD
	ch <- c.inUseD
	ch <- c.refusD
}

func (c *limitCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.src() {
		ch <- prometheus.MustNewConstMetric(c.maxD, prometheus.GaugeValue, l.Max, l.Name)
		if l.InUse >= 0 {
			ch <- prometheus.MustNewConstMetric(c.inUseD, prometheus.GaugeValue, l.InUse, l.Name)
		}
		ch <- prometheus.MustNewConstMetric(c.refusD, prometheus.CounterValue, float64(l.Refused), l.Name)
	}
}
