package httpgateway

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// readmeRoutes parses the README's HTTP/JSON API table: the first cell of
// each row names one or more routes, e.g. "`GET /v1/cluster/status`",
// "`POST /v1/nodes/drain`, `/v1/nodes/undrain`" (same method) or
// "`GET`, `POST /v1/replicate-config`" (two methods, one path).
func readmeRoutes(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## HTTP/JSON API")
	if start < 0 {
		t.Fatal("README has no HTTP/JSON API section")
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	tick := regexp.MustCompile("`([^`]*)`")
	var out []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.SplitN(line, "|", 3)[1]
		var methods, pending []string
		for _, m := range tick.FindAllStringSubmatch(cell, -1) {
			tok := m[1]
			method, path, hasPath := strings.Cut(tok, " ")
			switch {
			case !hasPath && !strings.HasPrefix(tok, "/"):
				pending = append(pending, tok) // a method alone: "`GET`, `POST /x`"
				continue
			case strings.HasPrefix(tok, "/"):
				path = tok
			default:
				methods = append(pending, method)
				pending = nil
			}
			for _, me := range methods {
				out = append(out, me+" "+path)
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestREADMERouteTableMatchesTheGateway: the README's HTTP table lists
// exactly the routes the gateway serves (with --enable-pprof, so the
// profile routes count too).
func TestREADMERouteTableMatchesTheGateway(t *testing.T) {
	g := New(shared.srv, Probes{Node: shared.node}, shared.metrics.Handler(), WithPprof())
	served := append([]string(nil), g.patterns...)
	sort.Strings(served)
	documented := readmeRoutes(t)
	in := func(xs []string, x string) bool {
		i := sort.SearchStrings(xs, x)
		return i < len(xs) && xs[i] == x
	}
	for _, r := range served {
		if !in(documented, r) {
			t.Errorf("served but not in README's HTTP table: %s", r)
		}
	}
	for _, r := range documented {
		if !in(served, r) {
			t.Errorf("in README's HTTP table but not served: %s", r)
		}
	}
}
