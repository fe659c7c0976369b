// Command coordctl is the operator CLI of coordd: cluster status and
// membership, snapshots, allocator calls, channel management (pchannels,
// streaming nodes, vchannels, the assignment stream, replication) and
// broadcasts (send, inspect, retry, abandon) over the gRPC API, through the
// client package (leader following, retries).
//
// Usage: coordctl [global flags] GROUP COMMAND [flags] [args]
//
// Exit codes: 0 success, 1 the request failed, 2 bad usage (nothing was
// sent to the server), 3 `cluster status` answered but no leader is known
// (the cluster cannot take writes yet).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
)

const (
	exitOK       = 0
	exitFail     = 1
	exitUsage    = 2
	exitNoLeader = 3
)

// exitError is a command's answer that was shown but ends with a non-zero
// exit code of its own (cluster status without a leader: exitNoLeader).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run executes one coordctl invocation and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	inv, err := parse(args, getenv)
	var help *helpRequest
	switch {
	case errors.As(err, &help):
		fmt.Fprint(stdout, help.text)
		return exitOK
	case err != nil:
		fmt.Fprintf(stderr, "coordctl: %s\n", oneLine(err.Error()))
		return exitUsage
	}
	cfg := client.Config{Endpoints: inv.g.endpointList, RequestTimeout: inv.g.timeout}
	if err := inv.g.tls.apply(&cfg); err != nil {
		fmt.Fprintf(stderr, "coordctl: %s\n", oneLine(err.Error()))
		return exitFail
	}
	c, err := client.New(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "coordctl: %s\n", oneLine(err.Error()))
		return exitFail
	}
	defer c.Close()
	e := &env{c: c, out: stdout, errOut: stderr, json: inv.g.output == "json", timeout: inv.g.timeout}
	if err := inv.act.run(ctx, e); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			fmt.Fprintf(stderr, "coordctl: %s: %s\n", inv.act.what, oneLine(ee.msg))
			return ee.code
		}
		msg := describe(err, inv.act.mutates) + transportHint(err, inv.g)
		fmt.Fprintf(stderr, "coordctl: %s: %s\n", inv.act.what, oneLine(msg))
		return exitFail
	}
	return exitOK
}

// describe is the server's message for a failed request (not the client's
// wrapping), plus a warning when a change may have been applied anyway.
func describe(err error, mutates bool) string {
	msg := err.Error()
	var ce *client.Error
	if errors.As(err, &ce) {
		msg = status.Convert(ce).Message()
		if ce.Stopped != nil && ce.Attempts > 1 {
			msg += fmt.Sprintf(" (gave up after %d attempts)", ce.Attempts)
		}
		if ce.LastAnswer != nil {
			// The deadline cut the last attempt short; what the server
			// said before is the useful part.
			msg += "; the answer before that: " + status.Convert(ce.LastAnswer).Message()
		}
		if ce.OutcomeUnknown && mutates {
			msg += "; an attempt's outcome is unknown: the change may have been applied (check 'coordctl cluster status')"
		}
	}
	return msg
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// transportHint explains a transport failure the gRPC text leaves a riddle:
// plaintext sent to a TLS port (the server's answer is no HTTP/2 preface),
// TLS sent to a plaintext port, or every endpoint unreachable (gRPC names
// only the last one dialled).
func transportHint(err error, g *globals) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "error reading server preface") && g.tls.ca == "":
		return "; the server seems to speak TLS: give --tls-ca CA_FILE (and --token-file for a token), or $COORDD_TLS_CA"
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "; the server speaks plaintext: drop --tls-ca (it runs --insecure)"
	case status.Code(err) == codes.Unavailable && mentionsEndpoint(msg, g.endpointList) &&
		(strings.Contains(msg, "connection refused") || strings.Contains(msg, "dial") || strings.Contains(msg, "no such host")):
		return fmt.Sprintf("; no member answered at any endpoint tried: %s (from %s)", strings.Join(g.endpointList, ", "), g.endpointsSrc)
	}
	return ""
}

// mentionsEndpoint: the dial error is about one of coordd's endpoints (not,
// say, a streaming node an insert was sent to).
func mentionsEndpoint(msg string, endpoints []string) bool {
	for _, e := range endpoints {
		if strings.Contains(msg, e) {
			return true
		}
	}
	return false
}
