package monitoring

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const (
	rulesFile     = "coordd-alerts.yml"
	rulesTestFile = "coordd-alerts.test.yml"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The files are read line by line, not as YAML (the module has no YAML
// parser): one `- alert: Name` line per rule, and per unit-test case an
// `alertname: Name` line followed by its `exp_alerts:` line. TestRulesCheck
// holds the reading to promtool's own rule count.
var (
	alertLine     = regexp.MustCompile(`^\s*- alert:\s*(\S+)\s*$`)
	alertnameLine = regexp.MustCompile(`^\s*alertname:\s*(\S+)\s*$`)
	expAlertsLine = regexp.MustCompile(`^\s*exp_alerts:\s*(\[\])?\s*$`)
)

// alertNames lists the alerts of a rules file, in order; a name given
// twice is an error.
func alertNames(rules string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	for _, l := range strings.Split(rules, "\n") {
		if m := alertLine.FindStringSubmatch(l); m != nil {
			if seen[m[1]] {
				return nil, fmt.Errorf("alert %s is defined twice", m[1])
			}
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	return names, nil
}

// cases counts, per alert, the unit-test cases where it fires (a non-empty
// exp_alerts) and where it stays silent (exp_alerts: []).
type cases struct{ fires, silent int }

func unitCases(tests string) (map[string]cases, error) {
	out := map[string]cases{}
	pending := ""
	for i, l := range strings.Split(tests, "\n") {
		if m := alertnameLine.FindStringSubmatch(l); m != nil {
			if pending != "" {
				return nil, fmt.Errorf("line %d: the case of %s before it has no exp_alerts line", i+1, pending)
			}
			pending = m[1]
			continue
		}
		if m := expAlertsLine.FindStringSubmatch(l); m != nil {
			if pending == "" {
				return nil, fmt.Errorf("line %d: exp_alerts without an alertname before it", i+1)
			}
			c := out[pending]
			if m[1] == "[]" {
				c.silent++
			} else {
				c.fires++
			}
			out[pending] = c
			pending = ""
		}
	}
	if pending != "" {
		return nil, fmt.Errorf("the last case (%s) has no exp_alerts line", pending)
	}
	return out, nil
}

// coverageGaps lists what the unit tests miss: an alert with no case where
// it fires or none where it stays silent, and a case of an alert the rules
// do not define.
func coverageGaps(rules, tests string) ([]string, error) {
	names, err := alertNames(rules)
	if err != nil {
		return nil, err
	}
	cs, err := unitCases(tests)
	if err != nil {
		return nil, err
	}
	var gaps []string
	defined := map[string]bool{}
	for _, n := range names {
		defined[n] = true
		c := cs[n]
		if c.fires == 0 {
			gaps = append(gaps, n+": no unit test where it fires")
		}
		if c.silent == 0 {
			gaps = append(gaps, n+": no unit test where it stays silent")
		}
	}
	for n := range cs {
		if !defined[n] {
			gaps = append(gaps, n+": tested but not defined in "+rulesFile)
		}
	}
	sort.Strings(gaps)
	return gaps, nil
}

// TestEveryRuleHasUnitTests: every alert in the rules file has a promtool
// case where it fires and one where it stays silent.
func TestEveryRuleHasUnitTests(t *testing.T) {
	rules := readFile(t, rulesFile)
	names, err := alertNames(rules)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 {
		t.Fatalf("found only %d alerts in %s: is the reading right?", len(names), rulesFile)
	}
	gaps, err := coverageGaps(rules, readFile(t, rulesTestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gaps {
		t.Error(g)
	}
}

// TestCoverageCheckCanFail: the check sees an untested rule, a rule tested
// only firing, and a case of an unknown alert.
func TestCoverageCheckCanFail(t *testing.T) {
	rules := `groups:
  - name: g
    rules:
      - alert: A
        expr: up == 0
      - alert: B
        expr: up == 0
      - alert: C
        expr: up == 0
`
	tests := `tests:
  - alert_rule_test:
      - eval_time: 1m
        alertname: A
        exp_alerts: []
      - eval_time: 2m
        alertname: A
        exp_alerts:
          - exp_labels: {x: y}
      - eval_time: 2m
        alertname: B
        exp_alerts:
          - exp_labels: {x: y}
      - eval_time: 2m
        alertname: Z
        exp_alerts: []
`
	gaps, err := coverageGaps(rules, tests)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"B: no unit test where it stays silent",
		"C: no unit test where it fires",
		"C: no unit test where it stays silent",
		"Z: tested but not defined in " + rulesFile,
	}
	if strings.Join(gaps, "\n") != strings.Join(want, "\n") {
		t.Fatalf("gaps:\n%s\nwant:\n%s", strings.Join(gaps, "\n"), strings.Join(want, "\n"))
	}
	if _, err := unitCases("      - alertname: A\n      - alertname: B\n        exp_alerts: []\n"); err == nil {
		t.Fatal("a case without exp_alerts was accepted")
	}
	if _, err := alertNames("- alert: A\n- alert: A\n"); err == nil {
		t.Fatal("an alert defined twice was accepted")
	}
}
