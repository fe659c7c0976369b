package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCPUProfileWritesWhatTheServerSends(t *testing.T) {
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/profile" {
			http.NotFound(w, r)
			return
		}
		asked = r.URL.Query().Get("seconds")
		w.Write([]byte("profile-bytes"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	path := filepath.Join(t.TempDir(), "p.pprof")
	cpuProfile(addr, 1500*time.Millisecond, path)
	if b, err := os.ReadFile(path); err != nil || string(b) != "profile-bytes" || asked != "1" {
		t.Fatalf("profile file %q %v, seconds=%q", b, err, asked)
	}
	srv.Config.Handler = http.NotFoundHandler()
	bad := filepath.Join(t.TempDir(), "bad.pprof")
	cpuProfile(addr, time.Second, bad)
	if _, err := os.Stat(bad); err == nil {
		t.Fatal("an HTTP error was written as a profile")
	}
}
