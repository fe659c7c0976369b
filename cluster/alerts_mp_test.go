package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/proc"
	"github.com/coordd/coordd/testutil"
)

// The shipped alert rules evaluated by a real Prometheus against a real
// cluster (docs/operations.md#monitoring): monitoring/ unit-tests every
// rule with promtool on sample series; this test shows the silent-node
// rule fires on the series a running cluster exports, through the scrape
// configuration an operator uses on a secure cluster (TLS and a token).

// requireRealServers is the variable `make test` sets: with it, a missing
// Prometheus fails the test instead of skipping it.
const requireRealServers = "COORDD_REQUIRE_REAL_SERVERS"

// prometheusPath finds Debian's prometheus server, or skips t when it is
// not installed (unless requireRealServers is set).
func prometheusPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	msg := "prometheus is not installed (apt-get install -y prometheus; .ci/run installs it): the shipped alerts are not evaluated against a running cluster"
	if os.Getenv(requireRealServers) == "1" {
		t.Fatalf("%s, and %s=1 requires it", msg, requireRealServers)
	}
	t.Skip(msg)
	return ""
}

func monitoringPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "monitoring", name)
}

// scrapeInterval is both the scrape and the rule evaluation interval.
const scrapeInterval = time.Second

// prometheusConfig scrapes l's members (over TLS with the test PKI's CA
// and token when l is secure) and streaming nodes, and loads the shipped
// rules, as monitoring/prometheus.example.yml does.
func prometheusConfig(l *cluster.Launcher) string {
	var members, sns []string
	for _, m := range l.Members() {
		members = append(members, fmt.Sprintf("'%s'", m.HTTPAddr))
	}
	for _, sn := range l.StreamingNodes() {
		sns = append(sns, fmt.Sprintf("'%s'", sn.MetricsAddr))
	}
	security := ""
	if ours(l) {
		security = fmt.Sprintf(`    scheme: https
    tls_config:
      ca_file: '%s'
    authorization:
      type: Bearer
      credentials_file: '%s'
`, pki.ca, pki.tokenFile)
	}
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: %[1]s
rule_files:
  - '%[2]s'
scrape_configs:
  - job_name: coordd
%[3]s    static_configs:
      - targets: [%[4]s]
  - job_name: coordd-streamingnode
    static_configs:
      - targets: [%[5]s]
`, scrapeInterval, monitoringPath("coordd-alerts.yml"), security, strings.Join(members, ", "), strings.Join(sns, ", "))
}

// promServer is a Prometheus process the test started.
type promServer struct {
	base  string // http://127.0.0.1:port
	child *proc.Child
}

// startPrometheus starts Prometheus on a free loopback port with config
// and a data dir under t.TempDir, and waits until it is ready. A port
// taken between choosing and binding it is retried on another.
func startPrometheus(t *testing.T, bin, config string) *promServer {
	t.Helper()
	dir := t.TempDir()
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		addr := freeLoopbackAddr(t)
		data := filepath.Join(dir, fmt.Sprintf("data-%d", attempt))
		c := startProcess(t, fmt.Sprintf("prometheus-%d", attempt), bin, "--config.file="+confPath,
			"--storage.tsdb.path="+data, "--web.listen-address="+addr, "--log.level=warn")
		p := &promServer{base: "http://" + addr, child: c}
		if p.waitReady(t, testutil.Timeout(60*time.Second)) {
			return p
		}
		if attempt == 3 {
			t.Fatalf("prometheus did not become ready on three ports (its logs are kept with the test's evidence)")
		}
	}
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitReady polls /-/ready until it answers 200 (true) or the process
// exits or the wait ends (false).
func (p *promServer) waitReady(t *testing.T, wait time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		select {
		case <-p.child.Done():
			return false
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// get fetches path from Prometheus's HTTP API into out (its "data").
func (p *promServer) get(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("GET %s: %v (%d: %.200s)", path, err, resp.StatusCode, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("GET %s: %s %s", path, env.Status, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query.
func (p *promServer) query(q string) ([]promSample, error) {
	var data struct {
		Result []promSample `json:"result"`
	}
	err := p.get("/api/v1/query?query="+url.QueryEscape(q), &data)
	return data.Result, err
}

type promAlert struct {
	Labels   map[string]string `json:"labels"`
	State    string            `json:"state"`
	ActiveAt time.Time         `json:"activeAt"`
}

func (p *promServer) alerts() ([]promAlert, error) {
	var data struct {
		Alerts []promAlert `json:"alerts"`
	}
	err := p.get("/api/v1/alerts", &data)
	return data.Alerts, err
}

// maxTerm is the highest raft term Prometheus has scraped (0 when none).
func (p *promServer) maxTerm(t *testing.T) int64 {
	t.Helper()
	res, err := p.query(`max(coordd_raft_term{job="coordd"})`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		return 0
	}
	var term float64
	if _, err := fmt.Sscan(fmt.Sprint(res[0].Value[1]), &term); err != nil {
		t.Fatalf("term sample %v: %v", res[0].Value, err)
	}
	return int64(term)
}

// ruleFor returns the `for` duration Prometheus loaded for alert.
func (p *promServer) ruleFor(t *testing.T, alert string) time.Duration {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name     string  `json:"name"`
				Type     string  `json:"type"`
				Duration float64 `json:"duration"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.get("/api/v1/rules", &data); err != nil {
		t.Fatal(err)
	}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Type == "alerting" && r.Name == alert {
				return time.Duration(r.Duration * float64(time.Second))
			}
		}
	}
	t.Fatalf("prometheus did not load the alert %s from the shipped rules", alert)
	return 0
}

// TestSilentNodeAlertFiresInPrometheus: a real Prometheus scrapes a secure
// three-member cluster with two streaming nodes (the shipped node TTL)
// every second and evaluates the shipped rules; a SIGKILLed streaming node
// makes CoorddStreamingNodeSilent fire for that node, and no other, within
// half the TTL plus the rule's `for` plus a scrape and an evaluation
// (and a margin for a loaded machine).
func TestSilentNodeAlertFiresInPrometheus(t *testing.T) {
	bin := prometheusPath(t)
	const alert = "CoorddStreamingNodeSilent"
	// Raft timings for a loaded machine (as the status-page test): the
	// LAN defaults elect often on a busy 2-core box, and each new leader
	// gives every node a fresh TTL. The node TTL and the rule are shipped.
	l := startClusterWith(t, cluster.LauncherConfig{StreamingNodes: 2, StreamingMetrics: true,
		ExtraArgs: []string{"--heartbeat-timeout", "1s", "--election-timeout", "1s", "--leader-lease-timeout", "500ms"}})
	prom := startPrometheus(t, bin, prometheusConfig(l))
	forDur := prom.ruleFor(t, alert)

	// Prometheus scrapes every member (the token and CA work) and sees
	// both streaming nodes' heartbeats from the leader.
	var ttl time.Duration
	victim := l.StreamingNodes()[0].Addr
	victimID := ""
	testutil.EventuallyEvery(t, 60*time.Second, 200*time.Millisecond, "prometheus to scrape every member and see both nodes' heartbeats", func() bool {
		up, err := prom.query(`up{job="coordd"} == 1`)
		if err != nil || len(up) != len(l.Members()) {
			return false
		}
		ages, err := prom.query(`coordd_streamingcoord_node_heartbeat_age_seconds`)
		if err != nil || len(ages) != 2 {
			return false
		}
		for _, a := range ages {
			if a.Metric["address"] == victim {
				victimID = a.Metric["node_id"]
			}
		}
		ttls, err := prom.query(`max(coordd_streamingcoord_node_ttl_seconds)`)
		if err != nil || len(ttls) != 1 {
			return false
		}
		var secs float64
		if _, err := fmt.Sscan(fmt.Sprint(ttls[0].Value[1]), &secs); err != nil {
			return false
		}
		ttl = time.Duration(secs * float64(time.Second))
		return victimID != "" && ttl > 0
	})
	if alerts, err := prom.alerts(); err != nil {
		t.Fatal(err)
	} else {
		for _, a := range alerts {
			if a.Labels["alertname"] == alert {
				t.Fatalf("%s is %s before any node was killed: %v", alert, a.State, a.Labels)
			}
		}
	}

	termAtKill := prom.maxTerm(t)
	if err := l.KillStreamingNode(0); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The rule's bound: the node is silent past half the TTL, the alert
	// fires `for` later, seen one scrape and one evaluation after that.
	// A new leader gives every node a fresh TTL (its heartbeat ages start
	// again), so an election after the kill restarts the bound; that is
	// allowed twice, each named in the log.
	bound := ttl/2 + forDur + 2*scrapeInterval
	margin := testutil.Timeout(3 * time.Second)
	deadline := killed.Add(bound + margin)
	restarts := 0
	for {
		alerts, err := prom.alerts()
		if err != nil {
			t.Fatal(err)
		}
		var firing *promAlert
		for i, a := range alerts {
			if a.Labels["alertname"] != alert {
				continue
			}
			if a.Labels["node_id"] != victimID {
				t.Fatalf("%s for node %s (%s), which is alive; the killed one is %s", alert, a.Labels["node_id"], a.Labels["address"], victimID)
			}
			if a.State == "firing" {
				firing = &alerts[i]
			}
		}
		if firing != nil {
			t.Logf("%s fired for node %s (%s) %v after the SIGKILL (TTL %v, for %v, bound %v plus margin)",
				alert, victimID, firing.Labels["address"], time.Since(killed).Round(100*time.Millisecond), ttl, forDur, bound)
			if firing.Labels["severity"] == "" || firing.Labels["instance"] == "" {
				t.Errorf("the alert's labels %v lack severity or the leader's instance", firing.Labels)
			}
			return
		}
		if time.Now().After(deadline) && restarts < 2 {
			if term := prom.maxTerm(t); term > termAtKill {
				restarts++
				t.Logf("term %d -> %d after the SIGKILL: a new leader restarted the node's TTL; the bound starts again", termAtKill, term)
				termAtKill, deadline = term, time.Now().Add(bound+margin)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not fire within %v of the SIGKILL (bound %v: TTL/2 %v + for %v + a scrape and an evaluation); alerts: %+v",
				alert, time.Since(killed).Round(100*time.Millisecond), bound, ttl/2, forDur, alerts)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
