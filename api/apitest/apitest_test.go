package apitest

import (
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestStartServesAndCloses: the member leads, serves the HTTP handler on
// its advertised address, and Close removes its data dir (twice is
// harmless). Registration needs the Cluster service, so the API packages'
// tests cover it (grpcserver's startTestNode).
func TestStartServesAndCloses(t *testing.T) {
	n, err := Start(Config{HTTP: true, SkipRegister: true, Serve: func(*Node) (Services, error) {
		return Services{HTTP: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) })}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n.Raft.EstablishedTerm() == 0 {
		t.Error("Start returned before the member was the established leader")
	}
	if !strings.HasSuffix(n.HTTP.URL, n.Self.HTTPAddr) {
		t.Errorf("HTTP serves on %s; Self advertises %s", n.HTTP.URL, n.Self.HTTPAddr)
	}
	resp, err := n.HTTP.Client().Get(n.HTTP.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTeapot {
		t.Errorf("GET = %d; want the Serve handler's 418", resp.StatusCode)
	}
	if err := n.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if _, err := os.Stat(n.DataDir); !os.IsNotExist(err) {
		t.Errorf("data dir after Close: %v; want it removed", err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestStartFailsCleanly: a Config that asks for HTTP without a handler is
// an error, and nothing is left behind.
func TestStartFailsCleanly(t *testing.T) {
	n, err := Start(Config{HTTP: true, SkipRegister: true})
	if err == nil || !strings.Contains(err.Error(), "no HTTP handler") {
		t.Fatalf("Start = %v, %v; want the missing-handler error", n, err)
	}
}
