package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/security"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestBadFlagsExit2WithOneLine(t *testing.T) {
	base := []string{"--coord", "127.0.0.1:1", "--addr", "127.0.0.1:0", "--wal-dir", t.TempDir()}
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--nope"}, nil, "flag provided but not defined: -nope"},
		{[]string{"--addr", "127.0.0.1:0", "--wal-dir", "w"}, nil, "--coord is required"},
		{[]string{"--coord", "127.0.0.1:1", "--wal-dir", "w"}, nil, "--addr is required"},
		{[]string{"--coord", "127.0.0.1:1", "--addr", "127.0.0.1:0"}, nil, "--wal-dir is required"},
		{append(base, "--coord", "localhost"), nil, `--coord "localhost": want HOST:PORT`},
		{append(base, "--coord", "a:1,b:0"), nil, `--coord "b:0": bad port`},
		{append(base, "--addr", "0.0.0.0:7000"), nil, "must name this host"},
		{append(base, "--heartbeat-interval", "1ms"), nil, "--heartbeat-interval must be at least 10ms"},
		{append(base, "--log-level", "loud"), nil, `--log-level "loud"`},
		{base, map[string]string{"STREAMINGNODE_HEARTBEAT_INTERVAL": "soon"}, `STREAMINGNODE_HEARTBEAT_INTERVAL="soon"`},
		{append(base, "extra"), nil, `unexpected argument "extra"`},
		{append(base, "--flusher-save-interval", "1ms"), nil, "--flusher-save-interval must be 0 (off) or at least 10ms"},
		{append(base, "--flusher-save-interval", "-1s"), nil, "--flusher-save-interval must be 0 (off) or at least 10ms"},
		{append(base, "--flusher-save-bytes", "8"), nil, "--flusher-save-bytes must be 0 (off) or at least 16"},
		{append(base, "--flusher-save-bytes", "-1"), nil, "--flusher-save-bytes must be 0 (off) or at least 16"},
		{append(base, "--flusher-save-bytes", "lots"), nil, `invalid value "lots" for flag -flusher-save-bytes`},
		{append(base, "--metrics-addr", "nohost"), nil, `--metrics-addr "nohost": want HOST:PORT`},
		{append(base, "--metrics-addr", "0.0.0.0:9100"), nil, "must name this host"},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, env(c.env), &stdout, &stderr)
		out := stderr.String()
		if code != 2 || !strings.Contains(out, c.want) || strings.Count(out, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line containing %q", c.args, code, out, c.want)
		}
	}
}

func TestEnvironmentAndFlags(t *testing.T) {
	cfg, level, err := parseFlags([]string{"--addr", "127.0.0.1:7001"}, env(map[string]string{
		"STREAMINGNODE_COORD": "127.0.0.1:1, 127.0.0.1:2", "STREAMINGNODE_ADDR": "127.0.0.1:9",
		"STREAMINGNODE_WAL_DIR": "/w", "STREAMINGNODE_DATA_DIR": "/d", "STREAMINGNODE_RESOURCE_GROUP": "rg",
		"STREAMINGNODE_HEARTBEAT_INTERVAL": "250ms", "STREAMINGNODE_LOG_LEVEL": "debug",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(cfg.Coord, ",") != "127.0.0.1:1,127.0.0.1:2" || cfg.Addr != "127.0.0.1:7001" || cfg.WALDir != "/w" ||
		cfg.DataDir != "/d" || cfg.ResourceGroup != "rg" || cfg.HeartbeatInterval != 250*time.Millisecond ||
		cfg.DrainTimeout != 30*time.Second || level != "debug" || cfg.UnsafeNoFence {
		t.Fatalf("cfg %+v level %s", cfg, level)
	}
	// Partial saves are on by default; 0 turns each trigger off.
	if cfg.FlusherSaveInterval != 10*time.Second || cfg.FlusherSaveBytes != 16<<20 || cfg.MetricsAddr != "" {
		t.Fatalf("flusher defaults: %+v", cfg)
	}
	cfg, _, err = parseFlags([]string{"--coord", "127.0.0.1:1", "--addr", "127.0.0.1:7001", "--wal-dir", "/w",
		"--flusher-save-interval", "0", "--flusher-save-bytes", "0", "--metrics-addr", "127.0.0.1:9100"}, env(nil))
	if err != nil || cfg.FlusherSaveInterval != 0 || cfg.FlusherSaveBytes != 0 || cfg.MetricsAddr != "127.0.0.1:9100" {
		t.Fatalf("flusher flags: %+v %v", cfg, err)
	}
	// The test-only breakage is off unless asked for.
	cfg, _, err = parseFlags([]string{"--coord", "127.0.0.1:1", "--addr", "127.0.0.1:7001", "--wal-dir", "/w",
		"--test-only-unsafe-no-fence"}, env(nil))
	if err != nil || !cfg.UnsafeNoFence {
		t.Fatalf("--test-only-unsafe-no-fence: %+v %v", cfg, err)
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, env(nil), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if !strings.Contains(stdout.String(), "--wal-dir") || !strings.Contains(stdout.String(), "STREAMINGNODE_") {
		t.Fatalf("usage: %s", stdout.String())
	}
}

func TestRunsUntilCancelled(t *testing.T) {
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--coord", dead, "--addr", "127.0.0.1:0", "--wal-dir", t.TempDir(), "--log-level", "error"},
			env(nil), &bytes.Buffer{}, &stderr)
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not stop")
	}
}

// A secure node serves its own port with TLS on a node certificate:
// --tls-cert by default, --listen-tls-cert for a node that authenticates
// to coordd with a token alone; without one, or with a certificate that is
// not a node's, it does not start.
func TestSecureNodeNeedsANodeCertificateForItsPort(t *testing.T) {
	dir := t.TempDir()
	pki, err := security.WriteDevPKI(dir, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok := filepath.Join(dir, "node.token")
	if err := os.WriteFile(tok, []byte("cdt_0123456789abcdef_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--coord", "127.0.0.1:1", "--addr", "127.0.0.1:0", "--wal-dir", dir, "--tls-ca", pki.Server.CA}
	node := pki.Node(1)
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
	}{
		"node certificate":               {[]string{"--tls-cert", node.Cert, "--tls-key", node.Key}, ""},
		"token and a listen certificate": {[]string{"--token-file", tok, "--listen-tls-cert", node.Cert, "--listen-tls-key", node.Key}, ""},
		"token alone":                    {[]string{"--token-file", tok}, "serves TLS with its own certificate"},
		"server certificate":             {[]string{"--tls-cert", pki.Server.Cert, "--tls-key", pki.Server.Key}, "streaming node identity"},
		"listen certificate without CA":  {[]string{"--tls-ca", "", "--listen-tls-cert", node.Cert}, "need --tls-ca"},
	} {
		cfg, _, err := parseFlags(append(append([]string{}, base...), tc.args...), env(nil))
		switch {
		case tc.wantErr == "" && (err != nil || cfg.ServeTLS == nil || cfg.CoordTLS == nil):
			t.Errorf("%s: %v (serve TLS %v)", name, err, cfg.ServeTLS != nil)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.wantErr)
		}
	}
}

// Review D5: `streamingnode --version` answers like coordd's (it was "flag
// provided but not defined: -version", exit 2).
func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{arg}, env(nil), &stdout, &stderr); code != 0 {
			t.Fatalf("%s: exit %d: %s", arg, code, stderr.String())
		}
		for _, want := range []string{"streamingnode ", "  commit:     ", "  built:      ", "  log format: "} {
			if !strings.Contains(stdout.String(), want) {
				t.Fatalf("%s: %q lacks %q", arg, stdout.String(), want)
			}
		}
	}
	var stdout bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, env(nil), &stdout, &bytes.Buffer{}); code != 0 || !strings.Contains(stdout.String(), "streamingnode --version") {
		t.Fatalf("usage (exit %d) does not mention --version:\n%s", code, stdout.String())
	}
}

// The timeouts a flag implies are in its help: coordd's node TTL is what
// a late heartbeat or an unfinished drain runs into.
func TestTimeoutsInHelp(t *testing.T) {
	u := usage()
	for _, want := range []string{
		"keep it well under coordd's --node-ttl (default 10s): a node silent that long is marked DOWN and its PChannels move",
		"then it stops anyway, and what it still held moves once coordd's --node-ttl passes",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}
