package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/logging"
	"github.com/coordd/coordd/testutil"
)

// TestUnaryChainCostsLittleOnANoopCall: the unary chain adds no more than
// a handful of allocations to a call that neither waits nor logs. Old
// code: 20 (a deadline timer, a random request ID, hclog's With, the
// debug line's fields built at info level).
func TestUnaryChainCostsLittleOnANoopCall(t *testing.T) {
	logs, err := logging.New(logging.Options{Name: "coordd", Level: "info", Output: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{logger: logs.Logger(), logs: logs, maxWait: DefaultMaxWait}
	unary := s.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: coordpb.Diagnostics_GetLogLevel_FullMethodName}
	req := &coordpb.GetLogLevelRequest{}
	noop := func(ctx context.Context, req any) (any, error) { return req, nil }
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := unary(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			return s.recoveryUnary(ctx, req, info, noop)
		}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 5 {
		t.Fatalf("the unary chain allocates %.0f times per no-op call, want at most 5", allocs)
	}
}

// TestBoundedContext: the maximum wait is reported at once and enforced
// when something waits; the context is cancelled when the call returns,
// whether or not its timer was made; a caller's earlier deadline is kept.
func TestBoundedContext(t *testing.T) {
	t.Run("reports the deadline without a timer", func(t *testing.T) {
		before := time.Now()
		ctx, b := boundWait(context.Background(), time.Hour)
		d, ok := ctx.Deadline()
		if !ok || d.Before(before.Add(time.Hour)) || b.made.Load() != nil {
			t.Fatalf("deadline %v %v, timer made %v", d, ok, b.made.Load() != nil)
		}
		b.release()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("after the call: %v, want Canceled", err)
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done not closed after the call")
		}
	})
	t.Run("enforces the deadline when waited on", func(t *testing.T) {
		ctx, b := boundWait(context.Background(), 20*time.Millisecond)
		defer b.release()
		select {
		case <-ctx.Done():
		case <-time.After(testutil.Timeout(10 * time.Second)):
			t.Fatal("the maximum wait never ended the call")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("err %v", ctx.Err())
		}
	})
	t.Run("child contexts are cancelled with the call", func(t *testing.T) {
		ctx, b := boundWait(context.WithValue(context.Background(), ctxTestKey{}, "v"), time.Hour)
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		if child.Value(ctxTestKey{}) != "v" {
			t.Fatal("values of the caller's context are lost")
		}
		b.release()
		select {
		case <-child.Done():
		case <-time.After(testutil.Timeout(10 * time.Second)):
			t.Fatal("child not cancelled when the call returned")
		}
	})
	t.Run("the caller cancelling reaches the handler", func(t *testing.T) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, b := boundWait(parent, time.Hour)
		defer b.release()
		cancel()
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("err %v", ctx.Err())
		}
	})
	t.Run("an earlier caller deadline is kept", func(t *testing.T) {
		parent, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		ctx, b := boundWait(parent, time.Hour)
		if ctx != parent || b != nil {
			t.Fatal("a caller deadline within the maximum wait was wrapped")
		}
		b.release() // nil-safe
	})
}

type ctxTestKey struct{}

// TestLazyRequestLogger: the request ID is looked up or made only when the
// call logs, once, and every line names it; a failing call's ID is sent
// back when the caller sent none.
func TestLazyRequestLogger(t *testing.T) {
	var out bytes.Buffer
	s := &Server{logger: hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Info}), maxWait: DefaultMaxWait}
	unary := s.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/coordd.v1.Test/Call"}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(MDRequestID, "req-from-caller"))
	var seen []string
	_, err := unary(ctx, nil, info, func(ctx context.Context, req any) (any, error) {
		s.log(ctx).Info("first")
		s.log(ctx).Info("second")
		seen = append(seen, logging.RequestID(ctx), logging.RequestID(ctx))
		return nil, status.Error(codes.Internal, "boom")
	})
	if status.Code(err) != codes.Internal {
		t.Fatal(err)
	}
	if seen[0] != "req-from-caller" || seen[1] != seen[0] {
		t.Fatalf("request IDs %v", seen)
	}
	if n := strings.Count(out.String(), "request_id=req-from-caller"); n != 3 {
		t.Fatalf("%d lines name the request, want 3 (two handler lines, the failure):\n%s", n, out.String())
	}
	// Without a caller ID, one fresh ID names every line of the call.
	out.Reset()
	_, _ = unary(context.Background(), nil, info, func(ctx context.Context, req any) (any, error) {
		s.log(ctx).Info("one")
		s.log(ctx).Info("two")
		return nil, nil
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	id := lines[0][strings.Index(lines[0], "request_id="):]
	if !strings.HasPrefix(id, "request_id=req-") || !strings.Contains(lines[1], id) {
		t.Fatalf("lines do not share one fresh request ID: %q", lines)
	}
}
