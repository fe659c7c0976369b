package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestSetLevelReachesEverySubLogger(t *testing.T) {
	var out bytes.Buffer
	l, err := New(Options{Name: "coordd", Level: "info", Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	sub := l.Logger().Named("raft").With("id", "n1")
	sub.Debug("hidden")
	if prev, err := l.SetLevel("DEBUG"); err != nil || prev != "info" {
		t.Fatalf("SetLevel: %q %v", prev, err)
	}
	sub.Debug("shown")
	if _, err := l.SetLevel("loud"); err == nil || !strings.Contains(err.Error(), `unknown log level "loud"`) {
		t.Fatalf("bad level: %v", err)
	}
	if l.Level() != "debug" {
		t.Fatalf("a refused level changed the level to %s", l.Level())
	}
	if s := out.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "shown") || !strings.Contains(s, "coordd.raft") {
		t.Fatalf("log:\n%s", s)
	}
}

func TestJSONFormat(t *testing.T) {
	var out bytes.Buffer
	l, err := New(Options{Name: "coordd", Level: "info", Format: "json", Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	l.Logger().Info("hello", "k", 7)
	var m map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not one JSON line: %q: %v", out.String(), err)
	}
	if m["@message"] != "hello" || m["k"] != float64(7) || m["@level"] != "info" {
		t.Fatalf("line: %v", m)
	}
}

func TestBadOptionsAreRefused(t *testing.T) {
	for _, o := range []Options{{Level: "verbose"}, {Level: "info", Format: "xml"}} {
		if _, err := New(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestRingKeepsRecentErrors: errors are kept whatever the level (even when
// the level hides them from the output), older ones are dropped and
// counted, and lines below error are not kept.
func TestRingKeepsRecentErrors(t *testing.T) {
	var out bytes.Buffer
	l, err := New(Options{Name: "coordd", Level: "error", Output: &out, Recent: 3})
	if err != nil {
		t.Fatal(err)
	}
	lg := l.Logger().Named("api")
	lg.Warn("only a warning")
	for i := 0; i < 5; i++ {
		lg.Error("disk failed", "n", i)
	}
	got, dropped := l.Recent(0)
	if len(got) != 3 || dropped != 2 {
		t.Fatalf("kept %d, dropped %d: %+v", len(got), dropped, got)
	}
	for i, e := range got {
		if e.Message != "disk failed" || e.Level != "error" || e.Logger != "coordd.api" || !strings.Contains(e.JSON, fmt.Sprintf(`"n":%d`, i+2)) {
			t.Errorf("entry %d: %+v", i, e)
		}
	}
	if last, _ := l.Recent(1); len(last) != 1 || !strings.Contains(last[0].JSON, `"n":4`) {
		t.Errorf("Recent(1) = %+v", last)
	}
}

func TestRequestScopedLogger(t *testing.T) {
	var out bytes.Buffer
	base := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info})
	if FromContext(context.Background(), base) != base || RequestID(context.Background()) != "" {
		t.Fatal("outside a request the fallback is used")
	}
	ctx := WithRequest(context.Background(), base, "req-9")
	FromContext(ctx, base).Info("step one")
	FromContext(ctx, base).Named("x").Info("step two")
	if RequestID(ctx) != "req-9" {
		t.Fatal("request ID lost")
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !strings.Contains(line, "request_id=req-9") {
			t.Errorf("line without the request ID: %s", line)
		}
	}
}
