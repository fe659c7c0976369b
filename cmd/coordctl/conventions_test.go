package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func runCtl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut, func(string) string { return "" })
	return code, out.String(), errOut.String()
}

func TestCLIConventions(t *testing.T) {
	tests := []struct {
		args         []string
		code         int
		stdout, errs string
	}{
		{[]string{"version"}, exitOK, "log format: ", ""},
		{[]string{"--version"}, exitOK, "coordctl ", ""},
		{[]string{"completion", "bash"}, exitOK, "complete -F _coordctl coordctl", ""},
		{[]string{"completion", "zsh"}, exitOK, "bashcompinit", ""},
		{[]string{"completion", "fish"}, exitUsage, "", "want 'coordctl completion bash'"},
		{[]string{"clustr", "status"}, exitUsage, "", `did you mean "cluster"?`},
		{[]string{"statu"}, exitUsage, "", `did you mean "cluster status"?`},
		{[]string{"cluster", "stauts"}, exitUsage, "", `did you mean "status"?`},
		{[]string{"--timeout", "1", "cluster", "status"}, exitUsage, "", `invalid value "1" for --timeout: want a duration like 5s`},
		{[]string{"cluster", "status", "--help"}, exitOK, "", ""},
		// Review D5: -o json on version, before or after it.
		{[]string{"version", "-o", "json"}, exitOK, `"log_format": "`, ""},
		{[]string{"-o", "json", "version"}, exitOK, `"commit": "`, ""},
		{[]string{"--version", "-o", "json"}, exitOK, `"built_at": "`, ""},
		{[]string{"version", "--output", "yaml"}, exitUsage, "", `bad output format "yaml"`},
		{[]string{"version", "now"}, exitUsage, "", `version: takes no arguments, got "now"`},
		{[]string{"version"}, exitOK, "  commit:     ", ""},
		{[]string{"version"}, exitOK, "  built:      ", ""},
	}
	for _, tt := range tests {
		code, out, errs := runCtl(t, tt.args...)
		if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errs, tt.errs) {
			t.Errorf("coordctl %q = %d\nstdout %q\nstderr %q\nwant %d, stdout ∋ %q, stderr ∋ %q", tt.args, code, out, errs, tt.code, tt.stdout, tt.errs)
		}
	}
}

// Review D5: 'coordctl --help' lists every command, the ones that need no
// server (version, completion, help) included.
func TestHelpListsEveryCommand(t *testing.T) {
	code, out, _ := runCtl(t, "--help")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	want := []string{"\n  version ", "\n  completion bash|zsh ", "\n  help [GROUP [COMMAND]] "}
	for _, g := range groups {
		for _, c := range g.cmds {
			want = append(want, "\n  "+strings.Join(strings.Fields(g.name+" "+c.name+" "+c.args), " ")+" ")
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("coordctl --help lacks %q", strings.TrimSpace(w))
		}
	}
}

// Every group and command appears in the bash completion script.
func TestCompletionCoversEveryCommand(t *testing.T) {
	script := completionScript("bash")
	for _, g := range groups {
		if !strings.Contains(script, g.name) {
			t.Errorf("completion lacks group %s", g.name)
		}
		for _, c := range g.cmds {
			if c.name != "" && !strings.Contains(script, c.name) {
				t.Errorf("completion lacks %s %s", g.name, c.name)
			}
		}
	}
}

func TestTransportHint(t *testing.T) {
	g := &globals{endpointList: []string{"127.0.0.1:7001", "127.0.0.1:7002"}, endpointsSrc: "the default"}
	if h := transportHint(errString(`connection error: desc = "error reading server preface: EOF"`), g); !strings.Contains(h, "give --tls-ca") {
		t.Errorf("plaintext to TLS: hint %q", h)
	}
	if h := transportHint(errString("tls: first record does not look like a TLS handshake"), g); !strings.Contains(h, "drop --tls-ca") {
		t.Errorf("TLS to plaintext: hint %q", h)
	}
	down := status.Error(codes.Unavailable, "dial tcp 127.0.0.1:7002: connect: connection refused")
	if h := transportHint(down, g); !strings.Contains(h, "127.0.0.1:7001, 127.0.0.1:7002 (from the default)") {
		t.Errorf("all endpoints down: hint %q", h)
	}
	// A streaming node refusing an insert is not the cluster being down.
	sn := status.Error(codes.Unavailable, "dial tcp 127.0.0.1:7201: connect: connection refused")
	if h := transportHint(sn, g); h != "" {
		t.Errorf("a streaming node's dial error got the endpoints hint %q", h)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
