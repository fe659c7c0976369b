package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// requireRealServers is the variable `make test` sets: with it, a missing
// promtool fails the test instead of skipping it.
const requireRealServers = "COORDD_REQUIRE_REAL_SERVERS"

// promtool returns the path of Debian's promtool (package prometheus), or
// skips t when it is not installed, unless requireRealServers is set.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	msg := "promtool is not installed (apt-get install -y prometheus; .ci/run installs it): the alert rules are not checked"
	if os.Getenv(requireRealServers) == "1" {
		t.Fatalf("%s, and %s=1 requires it", msg, requireRealServers)
	}
	t.Skip(msg)
	return ""
}

// runPromtool runs promtool with args in this folder and returns its
// combined output, failing t when it exits non-zero.
func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

var rulesFound = regexp.MustCompile(`SUCCESS: (\d+) rules found`)

// TestRulesCheck: promtool accepts the rules file, and it counts as many
// rules as rules.go's reading of the file finds alerts (so the coverage
// check below sees every rule).
func TestRulesCheck(t *testing.T) {
	out := runPromtool(t, "check", "rules", rulesFile)
	m := rulesFound.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("promtool check rules printed no rule count:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	alerts, err := alertNames(readFile(t, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	if n != len(alerts) {
		t.Fatalf("promtool finds %d rules, this test's reading finds %d alerts (%v): every rule must be an alert, one `- alert:` line each", n, len(alerts), alerts)
	}
}

// TestRulesUnitTests runs the promtool unit tests of every alert.
func TestRulesUnitTests(t *testing.T) {
	out := runPromtool(t, "test", "rules", rulesTestFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules did not report success:\n%s", out)
	}
}

// TestExampleConfig: promtool accepts prometheus.example.yml with its
// rules file beside it (the CA and token paths pointed at stand-in files:
// promtool checks that they exist).
func TestExampleConfig(t *testing.T) {
	dir := t.TempDir()
	conf := strings.ReplaceAll(readFile(t, "prometheus.example.yml"), "/etc/prometheus/coordd/", dir+"/")
	for name, body := range map[string]string{
		"prometheus.yml": conf, "ca.crt": "stand-in\n", "read.token": "stand-in\n", rulesFile: readFile(t, rulesFile),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := runPromtool(t, "check", "config", filepath.Join(dir, "prometheus.yml"))
	if !strings.Contains(out, "rules found") {
		t.Fatalf("promtool check config did not check the rules:\n%s", out)
	}
}
