package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

func noEnv(string) string { return "" }

// TestBadInput: every malformed command line exits 2 with exactly one line
// on stderr, before any client is created.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string // COORDD_ENDPOINTS
		want string // substring of the stderr line
	}{
		{nil, "", "missing command"},
		{[]string{"frobnicate"}, "", `unknown command "frobnicate"`},
		{[]string{"cluster"}, "", "cluster: missing command"},
		{[]string{"cluster", "nope"}, "", `cluster: unknown command "nope"`},
		{[]string{"cluster", "status", "extra"}, "", "cluster status: want no arguments"},
		{[]string{"cluster", "members", "x"}, "", "want no arguments"},
		{[]string{"cluster", "members", "--stale=maybe"}, "", "invalid boolean value"},
		{[]string{"cluster", "add-voter", "n4"}, "", "want ID RAFT_ADDR, got 1"},
		{[]string{"cluster", "add-voter", "n4", "127.0.0.1:8004", "x"}, "", "want ID RAFT_ADDR, got 3"},
		{[]string{"cluster", "add-voter", "n4", "nohost"}, "", "RAFT_ADDR"},
		{[]string{"cluster", "add-voter", "n/4", "127.0.0.1:8004"}, "", "member id"},
		{[]string{"cluster", "add-voter", "n4", "127.0.0.1:8004", "--grpc-addr", "x"}, "", "--grpc-addr"},
		{[]string{"cluster", "add-voter", "n4", "127.0.0.1:8004", "--http-addr=1.2.3.4:0"}, "", "--http-addr"},
		{[]string{"cluster", "remove"}, "", "want ID, got 0"},
		{[]string{"cluster", "remove", "a", "b"}, "", "want ID, got 2"},
		{[]string{"cluster", "transfer-leader", "a", "b"}, "", "at most one ID"},
		{[]string{"snapshot", "save"}, "", "want FILE, got 0"},
		{[]string{"snapshot", "save", "a", "b"}, "", "want FILE, got 2"},
		{[]string{"snapshot", "restore", "a"}, "", `snapshot: unknown command "restore"`},
		{[]string{"alloc", "ts"}, "", "want N, got 0"},
		{[]string{"alloc", "ts", "0"}, "", "N must be an integer in 1..65536"},
		{[]string{"alloc", "ts", "-3"}, "", "N must be an integer"},
		{[]string{"alloc", "id", "65537"}, "", "N must be an integer"},
		{[]string{"alloc", "id", "1.5"}, "", "N must be an integer"},
		{[]string{"alloc", "id", "abc"}, "", "N must be an integer"},
		{[]string{"alloc", "id", "99999999999999999999"}, "", "N must be an integer"},
		{[]string{"alloc", "id", "1", "2"}, "", "want N, got 2"},
		{[]string{"--endpoints", "localhost", "cluster", "status"}, "", `bad endpoint "localhost"`},
		{[]string{"--endpoints", "127.0.0.1:7001,", "cluster", "status"}, "", `bad endpoint ""`},
		{[]string{"--endpoints", "127.0.0.1:70010", "cluster", "status"}, "", "port must be"},
		{[]string{"cluster", "status", "--endpoints", ":7001"}, "", "empty host"},
		{[]string{"cluster", "status"}, "nonsense", "(from COORDD_ENDPOINTS)"},
		{[]string{"-o", "yaml", "cluster", "status"}, "", `bad output format "yaml"`},
		{[]string{"cluster", "status", "-o", "xml"}, "", `bad output format "xml"`},
		{[]string{"cluster", "status", "-o"}, "", "flag needs an argument"},
		{[]string{"--timeout", "0s", "cluster", "status"}, "", "bad --timeout"},
		{[]string{"--timeout", "soon", "cluster", "status"}, "", "invalid value"},
		{[]string{"cluster", "status", "--bogus"}, "", "flag provided but not defined: -bogus"},
		{[]string{"--bogus", "cluster", "status"}, "", "flag provided but not defined"},
		{[]string{"help", "nope"}, "", `help: unknown command "nope"`},
		{[]string{"help", "pchannel", "nope"}, "", `help: unknown command "pchannel" "nope"`},
		// Channel management.
		{[]string{"pchannel"}, "", "pchannel: missing command"},
		{[]string{"pchannel", "remove", "x_1"}, "", `pchannel: unknown command "remove"`},
		{[]string{"pchannel", "list", "x"}, "", "pchannel list: want no arguments"},
		{[]string{"pchannel", "list", "--stale=maybe"}, "", "invalid boolean value"},
		{[]string{"pchannel", "list", "--all"}, "", "flag provided but not defined: -all"},
		{[]string{"pchannel", "add"}, "", "pchannel add: want NAME..., got 0"},
		{[]string{"pchannel", "add", "nounderscore"}, "", `pchannel name "nounderscore"`},
		{[]string{"pchannel", "add", "dml_"}, "", `pchannel name "dml_"`},
		{[]string{"pchannel", "add", "dml_01"}, "", "leading zero"},
		{[]string{"pchannel", "add", "dml_x"}, "", "not a small non-negative integer"},
		{[]string{"pchannel", "add", "bad prefix_1"}, "", "bad prefix"},
		{[]string{"pchannel", "add", "dml_1", "dml_-1"}, "", `"dml_-1"`},
		{[]string{"pchannel", "add", "dml_1", "dml_2", "dml_1"}, "", "pchannel dml_1 listed twice"},
		{[]string{"pchannel", "rebalance", "now"}, "", "pchannel rebalance: want no arguments"},
		{[]string{"node"}, "", "node: missing command"},
		{[]string{"node", "kill", "1"}, "", `node: unknown command "kill"`},
		{[]string{"node", "list", "1"}, "", "node list: want no arguments"},
		{[]string{"node", "drain"}, "", "node drain: want ID, got 0"},
		{[]string{"node", "drain", "1", "2"}, "", "want ID, got 2"},
		{[]string{"node", "drain", "0"}, "", `node ID must be a positive integer, got "0"`},
		{[]string{"node", "drain", "-1"}, "", `node ID must be a positive integer, got "-1"`},
		{[]string{"node", "drain", "n1"}, "", "node ID must be a positive integer"},
		{[]string{"node", "drain", "18446744073709551616"}, "", "node ID must be a positive integer"},
		{[]string{"node", "drain", "1", "--reason", strings.Repeat("r", 1025)}, "", "--reason is 1025 bytes (max 1024)"},
		{[]string{"node", "drain", "1", "--reason"}, "", "flag needs an argument"},
		{[]string{"node", "undrain"}, "", "node undrain: want ID, got 0"},
		{[]string{"node", "undrain", "abc"}, "", "node ID must be a positive integer"},
		{[]string{"node", "undrain", "1", "--reason", "x"}, "", "flag provided but not defined: -reason"},
		{[]string{"vchannel"}, "", "vchannel: missing command"},
		{[]string{"vchannel", "alloc"}, "", "vchannel alloc: want COLLECTION_ID N, got 0"},
		{[]string{"vchannel", "alloc", "5"}, "", "want COLLECTION_ID N, got 1"},
		{[]string{"vchannel", "alloc", "5", "2", "3"}, "", "want COLLECTION_ID N, got 3"},
		{[]string{"vchannel", "alloc", "0", "2"}, "", `COLLECTION_ID must be a positive integer, got "0"`},
		{[]string{"vchannel", "alloc", "-5", "2"}, "", "COLLECTION_ID must be a positive integer"},
		{[]string{"vchannel", "alloc", "x", "2"}, "", "COLLECTION_ID must be a positive integer"},
		{[]string{"vchannel", "alloc", "9223372036854775808", "2"}, "", "COLLECTION_ID must be a positive integer"},
		{[]string{"vchannel", "alloc", "5", "0"}, "", `N must be an integer in 1..1024, got "0"`},
		{[]string{"vchannel", "alloc", "5", "1025"}, "", "N must be an integer in 1..1024"},
		{[]string{"vchannel", "alloc", "5", "-2"}, "", "N must be an integer in 1..1024"},
		{[]string{"vchannel", "alloc", "5", "two"}, "", "N must be an integer in 1..1024"},
		{[]string{"vchannel", "alloc", "5", "2", "--request-id", strings.Repeat("r", 129)}, "", "--request-id: request_id is 129 bytes (max 128)"},
		{[]string{"vchannel", "list", "0"}, "", "COLLECTION_ID must be a positive integer"},
		{[]string{"vchannel", "list", "1", "2"}, "", "want at most one COLLECTION_ID, got 2"},
		{[]string{"vchannel", "drop"}, "", "vchannel drop: want COLLECTION_ID, got 0"},
		{[]string{"vchannel", "drop", "abc"}, "", "COLLECTION_ID must be a positive integer"},
		{[]string{"log-level", "loud"}, "", `log-level: unknown log level "loud": want one of trace, debug, info, warn, error`},
		{[]string{"log-level", "info", "debug"}, "", "log-level: want [LEVEL], got 2"},
		{[]string{"debug", "bundle"}, "", "debug bundle: want FILE, got 0"},
		{[]string{"debug", "bundle", ""}, "", "debug bundle: FILE is empty"},
		{[]string{"debug", "bundle", "a", "b"}, "", "debug bundle: want FILE, got 2"},
		{[]string{"debug", "dump"}, "", `debug: unknown command "dump"`},
		{[]string{"assignment"}, "", "assignment: missing command"},
		{[]string{"assignment", "list"}, "", `assignment: unknown command "list"`},
		{[]string{"assignment", "watch", "x"}, "", "assignment watch: want no arguments"},
		{[]string{"assignment", "watch", "--count", "-1"}, "", "--count must not be negative, got -1"},
		{[]string{"assignment", "watch", "--count", "two"}, "", "invalid value"},
		{[]string{"assignment", "watch", "--duration", "-1s"}, "", "--duration must not be negative"},
		{[]string{"assignment", "watch", "--duration", "5"}, "", "invalid value"},
		{[]string{"replicate"}, "", "replicate: missing command"},
		{[]string{"replicate", "get", "x"}, "", "replicate get: want no arguments"},
		{[]string{"replicate", "set"}, "", "replicate set: want FILE, got 0"},
		{[]string{"replicate", "set", "a", "b"}, "", "want FILE, got 2"},
		{[]string{"replicate", "set", ""}, "", "FILE is empty"},
		{[]string{"replicate", "set", "/nonexistent/replicate.json"}, "", "no such file"},
		{[]string{"pchannel", "list", "-o", "yaml"}, "", `bad output format "yaml"`},
		{[]string{"token", "create"}, "", "want ROLE, got 0"},
		{[]string{"token", "create", "root"}, "", `unknown role "root"`},
		{[]string{"token", "create", "node", "--name", "sn1"}, "", "add --node-id N"},
		{[]string{"token", "create", "proxy", "--node-id", "3"}, "", "--node-id is only for role node"},
		{[]string{"token", "revoke", "xyz"}, "", "16 lower-case hex"},
		{[]string{"--token", "t", "cluster", "status"}, "", "a token needs TLS"},
		{[]string{"--tls-ca", "ca.crt", "--token", "t", "--token-file", "f", "cluster", "status"}, "", "not both"},
		{[]string{"--tls-cert", "c.crt", "cluster", "status"}, "", "need --tls-ca"},
		{[]string{"--tls-ca", "ca.crt", "--tls-cert", "c.crt", "cluster", "status"}, "", "together"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			getenv := func(k string) string {
				if k == envEndpoints {
					return tc.env
				}
				return ""
			}
			code := run(context.Background(), tc.args, &stdout, &stderr, getenv)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d (stderr %q)", code, exitUsage, stderr.String())
			}
			line := stderr.String()
			if strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") || !strings.HasPrefix(line, "coordctl: ") {
				t.Fatalf("stderr %q: want one line starting with \"coordctl: \"", line)
			}
			if !strings.Contains(line, tc.want) {
				t.Fatalf("stderr %q does not mention %q", line, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// TestParse: well-formed command lines parse into the expected settings.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		env       string
		endpoints []string
		output    string
		timeout   time.Duration
		what      string
	}{
		{[]string{"cluster", "status"}, "", []string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"}, "table", 5 * time.Second, "cluster status"},
		{[]string{"cluster", "status"}, "127.0.0.1:9001", []string{"127.0.0.1:9001"}, "table", 5 * time.Second, "cluster status"},
		{[]string{"--endpoints", "a:1, b:2", "cluster", "status"}, "127.0.0.1:9001", []string{"a:1", "b:2"}, "table", 5 * time.Second, "cluster status"},
		{[]string{"cluster", "members", "--stale", "-o", "json"}, "", nil, "json", 5 * time.Second, "cluster members"},
		{[]string{"-o", "json", "cluster", "--timeout", "2s", "members"}, "", nil, "json", 2 * time.Second, "cluster members"},
		{[]string{"cluster", "add-voter", "n4", "127.0.0.1:8004", "--grpc-addr", "127.0.0.1:7004", "--http-addr=127.0.0.1:9004"}, "", nil, "table", 5 * time.Second, "add voter n4"},
		{[]string{"cluster", "add-voter", "--grpc-addr", "127.0.0.1:7004", "n4", "127.0.0.1:8004"}, "", nil, "table", 5 * time.Second, "add voter n4"},
		{[]string{"cluster", "remove", "n3"}, "", nil, "table", 5 * time.Second, "remove member n3"},
		{[]string{"cluster", "transfer-leader"}, "", nil, "table", 5 * time.Second, "transfer leadership"},
		{[]string{"cluster", "transfer-leader", "n2", "--output", "json"}, "", nil, "json", 5 * time.Second, "transfer leadership"},
		{[]string{"snapshot", "save", "/tmp/x.snap", "--force"}, "", nil, "table", 5 * time.Second, "snapshot save"},
		{[]string{"alloc", "ts", "1"}, "", nil, "table", 5 * time.Second, "alloc ts"},
		{[]string{"alloc", "id", "65536", "-o=json"}, "", nil, "json", 5 * time.Second, "alloc id"},
		{[]string{"alloc", "id", "--", "7"}, "", nil, "table", 5 * time.Second, "alloc id"},
		{[]string{"pchannel", "list", "--stale", "-o", "json"}, "", nil, "json", 5 * time.Second, "pchannel list"},
		{[]string{"pchannel", "add", "by-dev-rootcoord-dml_16", "by-dev-rootcoord-dml_0"}, "", nil, "table", 5 * time.Second, "pchannel add"},
		{[]string{"-o", "json", "pchannel", "rebalance"}, "", nil, "json", 5 * time.Second, "pchannel rebalance"},
		{[]string{"node", "list", "--all", "--stale"}, "", nil, "table", 5 * time.Second, "node list"},
		{[]string{"node", "drain", "--reason", "kernel upgrade", "7"}, "", nil, "table", 5 * time.Second, "drain node 7"},
		{[]string{"node", "drain", "7", "--reason=x", "-o", "json"}, "", nil, "json", 5 * time.Second, "drain node 7"},
		{[]string{"node", "undrain", "18446744073709551615"}, "", nil, "table", 5 * time.Second, "undrain node 18446744073709551615"},
		{[]string{"vchannel", "alloc", "42", "1024", "--request-id", "r1"}, "", nil, "table", 5 * time.Second, "vchannel alloc"},
		{[]string{"vchannel", "alloc", "--request-id=r1", "9223372036854775807", "1"}, "", nil, "table", 5 * time.Second, "vchannel alloc"},
		{[]string{"vchannel", "list"}, "", nil, "table", 5 * time.Second, "vchannel list"},
		{[]string{"vchannel", "list", "42", "--stale"}, "", nil, "table", 5 * time.Second, "vchannel list"},
		{[]string{"vchannel", "drop", "42"}, "", nil, "table", 5 * time.Second, "vchannel drop"},
		{[]string{"assignment", "watch"}, "", nil, "table", 5 * time.Second, "assignment watch"},
		{[]string{"assignment", "watch", "--count", "3", "--duration", "10s", "-o", "json"}, "", nil, "json", 5 * time.Second, "assignment watch"},
		{[]string{"replicate", "get", "--timeout", "1s"}, "", nil, "table", time.Second, "replicate get"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			inv, err := parse(tc.args, func(k string) string {
				if k == envEndpoints {
					return tc.env
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.endpoints != nil && !slices.Equal(inv.g.endpointList, tc.endpoints) {
				t.Errorf("endpoints %q, want %q", inv.g.endpointList, tc.endpoints)
			}
			if inv.g.output != tc.output || inv.g.timeout != tc.timeout || inv.act.what != tc.what {
				t.Errorf("got output %q timeout %v what %q", inv.g.output, inv.g.timeout, inv.act.what)
			}
		})
	}
}

// TestHelp: help requests print usage on stdout and exit 0.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Usage:\n  coordctl [global flags] GROUP COMMAND"},
		{[]string{"--help"}, "cluster add-voter ID RAFT_ADDR"},
		{[]string{"-h"}, "alloc ts N"},
		{[]string{"help", "cluster"}, "coordctl cluster: inspect"},
		{[]string{"cluster", "--help"}, "transfer-leader [ID]"},
		{[]string{"cluster", "help"}, "add-voter ID RAFT_ADDR"},
		{[]string{"snapshot", "-h"}, "save FILE"},
		{[]string{"alloc", "--help"}, "ts N"},
		{[]string{"cluster", "add-voter", "--help"}, "--grpc-addr address"},
		{[]string{"help", "snapshot", "save"}, "--force"},
		{[]string{"cluster", "members", "-h"}, "--stale"},
		{[]string{"--help"}, "pchannel add NAME..."},
		{[]string{"help"}, "vchannel alloc COLLECTION_ID N"},
		{[]string{"help"}, "replicate set FILE"},
		{[]string{"pchannel", "--help"}, "rebalance"},
		{[]string{"node", "list", "--help"}, "--all"},
		{[]string{"help", "node", "drain"}, "--reason"},
		{[]string{"vchannel", "alloc", "-h"}, "--request-id ID"},
		{[]string{"assignment", "watch", "--help"}, "--count K"},
		{[]string{"help", "assignment", "watch"}, "--duration D"},
		{[]string{"replicate", "help"}, "set FILE"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tc.args, &stdout, &stderr, noEnv); code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) || stderr.Len() != 0 {
				t.Fatalf("stdout %q lacks %q (stderr %q)", stdout.String(), tc.want, stderr.String())
			}
		})
	}
}
