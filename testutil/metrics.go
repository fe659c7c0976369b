package testutil

import dto "github.com/prometheus/client_model/go"

// SampleValue is what a test reads from one Prometheus sample: a counter's
// or gauge's value, or a histogram's sample count; -1 for other kinds.
func SampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return -1
}
