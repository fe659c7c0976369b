package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const dashboardFile = "grafana-dashboard.json"

type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		ID      int    `json:"id"`
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal([]byte(readFile(t, dashboardFile)), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// exprs returns every query of the dashboard.
func (d dashboard) exprs() []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\bcoordd_[a-zA-Z0-9_]+`)

// ruleMetrics lists the coordd metrics the alert rules read (from their
// expr lines; annotations name metrics too, but only as advice).
func ruleMetrics(rules string) []string {
	seen := map[string]bool{}
	inExpr := false
	for _, l := range strings.Split(rules, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trimmed, "expr:"):
			inExpr = true
		case strings.HasPrefix(trimmed, "for:"), strings.HasPrefix(trimmed, "labels:"), strings.HasPrefix(trimmed, "- alert:"):
			inExpr = false
		}
		if inExpr {
			for _, m := range metricName.FindAllString(l, -1) {
				seen[strings.TrimSuffix(strings.TrimSuffix(m, "_sum"), "_count")] = true
			}
		}
	}
	var out []string
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// TestDashboardShowsEveryAlertSignal: the dashboard parses, its panels
// have distinct IDs and queries, and it charts every metric an alert rule
// reads, so an operator paged by an alert finds its signal on it.
func TestDashboardShowsEveryAlertSignal(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Fatalf("dashboard title %q uid %q: both are needed to import it", d.Title, d.UID)
	}
	ids := map[int]string{}
	for _, p := range d.Panels {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	all := strings.Join(d.exprs(), "\n")
	metrics := ruleMetrics(readFile(t, rulesFile))
	if len(metrics) < 15 {
		t.Fatalf("the rules read only %d coordd metrics (%v): is the reading right?", len(metrics), metrics)
	}
	for _, m := range metrics {
		if !strings.Contains(all, m) {
			t.Errorf("the alert rules read %s but no dashboard panel shows it", m)
		}
	}
}

// TestDashboardQueriesParse: promtool parses every dashboard query (each
// written into a recording rule, the template variables replaced by
// values), so a typo shows here rather than as an empty panel.
func TestDashboardQueriesParse(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$job", "coordd", "$sn_job", "coordd-streamingnode")
	exprs := readDashboard(t).exprs()
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runPromtool(t, "check", "rules", path)
	if want := fmt.Sprintf("SUCCESS: %d rules found", len(exprs)); !strings.Contains(out, want) {
		t.Fatalf("promtool check of the dashboard queries: want %q in\n%s", want, out)
	}
}
