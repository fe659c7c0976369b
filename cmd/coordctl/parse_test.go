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
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			inv, err := parse(tc.args, func(string) string { return tc.env })
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
