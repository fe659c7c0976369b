// Package monitoring holds what an operator loads into Prometheus and
// Grafana, as shipped: the alert rules (coordd-alerts.yml) with their
// promtool unit tests (coordd-alerts.test.yml), a scrape configuration
// (prometheus.example.yml) and a Grafana dashboard (grafana-dashboard.json).
// docs/operations.md#monitoring says what each alert means.
//
// The package has no code; its tests run promtool over the files, check
// that every alert has a unit test where it fires and one where it stays
// silent, and that the dashboard shows every metric an alert reads. The
// test that a real Prometheus fires the silent-node alert against a
// running cluster is cluster/alerts_mp_test.go.
package monitoring
