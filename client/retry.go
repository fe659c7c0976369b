package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Response metadata keys the server sets on Unavailable answers.
const (
	// MDLeaderID names the current leader, when known.
	MDLeaderID = "coordd-leader-id"
	// MDLeaderGRPC is the leader's gRPC address, when known.
	MDLeaderGRPC = "coordd-leader-grpc"
	// MDOutcome is "unknown" when a write may or may not have happened,
	// "none" when the server answered Unavailable having done nothing.
	MDOutcome = "coordd-outcome"
	// OutcomeUnknown is the value of MDOutcome for an unknown outcome.
	OutcomeUnknown = "unknown"
	// OutcomeNone is the value of MDOutcome of a server's Unavailable
	// answer that did nothing (not the leader, not caught up, shutting
	// down before the request was submitted). An Unavailable without
	// either value, after the request left the client, is a connection
	// that broke with the request possibly delivered: its outcome is
	// unknown.
	OutcomeNone = "none"
	// MDRetryAfter (milliseconds) marks a ResourceExhausted answer that
	// asking again later may change (the leader's proposal queue was
	// full; nothing was done).
	MDRetryAfter = "coordd-retry-after-ms"
)

// maxRetryAfter caps a server's retry hint, so a bad value cannot park a
// call; the call's deadline bounds every wait anyway.
const maxRetryAfter = 5 * time.Second

// Error is the error of a failed call. status.Code(err) and
// status.Convert(err) report the status of the last attempt.
type Error struct {
	// Op names the call and its main argument, e.g. "RemoveMember(n3)".
	Op string
	// Endpoint is where the last attempt went.
	Endpoint string
	// Attempts is how many attempts were made.
	Attempts int
	// OutcomeUnknown is set when an attempt's outcome was unknown: for a
	// write, it may have been applied even though the call failed.
	OutcomeUnknown bool
	// LeaderID is the last leader named by a server, if any.
	LeaderID string
	// Err is the last attempt's error (usually a gRPC status error).
	Err error
	// Stopped says why retrying ended early, if it did: the context's
	// error or errRetryBudget. Nil when Err was definitive.
	Stopped error
	// LastAnswer is the last error a server answered with, kept when the
	// call's own context ended during a later attempt (Err is then only
	// the context's error, which says nothing of why the earlier attempts
	// failed, e.g. which resource key a broadcast waited for). Nil
	// otherwise.
	LastAnswer error
}

var errRetryBudget = errors.New("retry budget exhausted")

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client: %s: %v", e.Op, e.Err)
	var notes []string
	if e.Attempts > 0 {
		n := fmt.Sprintf("endpoint %s, %d attempts", e.Endpoint, e.Attempts)
		if e.Attempts == 1 {
			n = n[:len(n)-1]
		}
		notes = append(notes, n)
	}
	if e.Stopped != nil {
		notes = append(notes, "gave up: "+e.Stopped.Error())
	}
	if e.LastAnswer != nil {
		notes = append(notes, "the answer before that: "+e.LastAnswer.Error())
	}
	if e.OutcomeUnknown {
		notes = append(notes, "an attempt's outcome is unknown: the change may have been applied")
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(notes, "; "))
	}
	return b.String()
}

// Unwrap returns the last attempt's error and the reason retrying stopped.
func (e *Error) Unwrap() []error {
	if e.Stopped != nil {
		return []error{e.Err, e.Stopped}
	}
	return []error{e.Err}
}

// GRPCStatus returns the status of the last attempt.
func (e *Error) GRPCStatus() *status.Status {
	if st, ok := status.FromError(e.Err); ok {
		return st
	}
	if e.Stopped != nil && e.Stopped != errRetryBudget {
		return status.FromContextError(e.Stopped)
	}
	return status.New(codes.Unknown, e.Err.Error())
}

// IsOutcomeUnknown reports whether err says a write may or may not have
// been applied.
func IsOutcomeUnknown(err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return e.OutcomeUnknown
	}
	return false
}

// callKind selects the retry rules of a call. The rule behind them
// (docs/semantics.md#client-retries): after an attempt whose outcome is
// unknown, a call is sent again only when the resend cannot do the change
// twice — its request carries a request ID the SDK made once for the
// logical call (the server answers a repeat with the first result), or
// repeating it changes nothing (a read, an allocation, an ack). A call
// that would do it twice (a new token, an untargeted leadership transfer)
// is never resent after an unknown outcome.
type callKind int

const (
	// retrySafe calls (reads, allocations, RegisterMember) are retried
	// after any retryable error, outcome unknown or not.
	retrySafe callKind = iota
	// mutation calls are retried at most OutcomeUnknownRetries times
	// after an unknown outcome.
	mutation
	// mutationOnce calls are never retried after an unknown outcome.
	mutationOnce
	// longMutation calls wait on server-side work (a broadcast waits for
	// every ack and its callback), so one attempt may use the whole call
	// deadline instead of AttemptTimeout; otherwise they are mutations.
	longMutation
	// longRetrySafe is retrySafe without the AttemptTimeout bound.
	longRetrySafe
)

// long reports a kind whose one attempt may use the whole call deadline.
func (k callKind) long() bool { return k == longMutation || k == longRetrySafe }

// rpcFunc makes one attempt on cc. It must pass opts to the RPC.
type rpcFunc func(ctx context.Context, cc *grpc.ClientConn, opts ...grpc.CallOption) error

// callCtx bounds ctx by RequestTimeout.
func (c *Client) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.RequestTimeout)
}

// do runs fn with retries and returns the endpoint that answered.
func (c *Client) do(ctx context.Context, op string, kind callKind, fn rpcFunc) (string, error) {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	return c.retry(ctx, op, kind, fn)
}

func (c *Client) retry(ctx context.Context, op string, kind callKind, fn rpcFunc) (string, error) {
	var (
		e       = &Error{Op: op}
		order   = c.order()
		next    int    // index into order of the next endpoint to try
		hint    string // leader endpoint to try next, from the last answer
		tried   = map[string]bool{}
		delay   = backoffStart
		unknown int
		// answered is the last attempt's error that came while the
		// call's context was live (a server's answer or one attempt's
		// own timeout).
		answered error
	)
	maxUnknown := c.cfg.OutcomeUnknownRetries
	if kind == mutationOnce {
		maxUnknown = 0
	}
	for {
		addr := hint
		hint = ""
		if addr == "" {
			addr = order[next%len(order)]
			next++
		}
		if tried[addr] {
			// Back at an endpoint this round already tried: back off first.
			if err := sleep(ctx, delay); err != nil {
				e.Stopped = err
				return "", e
			}
			delay = min(2*delay, backoffCap)
			clear(tried)
		}
		tried[addr] = true

		e.Attempts++
		e.Endpoint = addr
		md, sent, err := c.attempt(ctx, addr, fn, !kind.long())
		if err == nil {
			c.setPreferred(addr)
			return addr, nil
		}
		e.Err = err
		if errors.Is(err, ErrClosed) {
			return "", e
		}
		if id := first(md, MDLeaderID); id != "" {
			e.LeaderID = id
		}
		if stopped := callEnded(ctx); stopped != nil {
			// The attempt ended with the call: whatever its transport
			// said (a reset stream, a canceled read), it was cut short.
			e.Err = status.FromContextError(stopped).Err()
			e.Stopped = stopped
			e.LastAnswer = answered
			// An attempt the deadline cut after it left the client may
			// have been applied.
			e.OutcomeUnknown = e.OutcomeUnknown || sent
			return "", e
		}
		answered = err
		retry, unknownOutcome := classify(err, md, sent)
		if !retry {
			return "", e
		}
		if unknownOutcome {
			e.OutcomeUnknown = true
			if kind != retrySafe && kind != longRetrySafe {
				unknown++
				if unknown > maxUnknown {
					e.Stopped = errRetryBudget
					return "", e
				}
			}
		}
		if e.Attempts > c.cfg.MaxRetries {
			e.Stopped = errRetryBudget
			return "", e
		}
		if wait, ok := retryAfter(err, md); ok {
			// The leader is saturated: every endpoint forwards to it, so
			// wait (at least its hint) before any next attempt.
			if err := sleep(ctx, max(delay, wait)); err != nil {
				e.Stopped = err
				return "", e
			}
			delay = min(2*delay, backoffCap)
			clear(tried)
			continue
		}
		if h := first(md, MDLeaderGRPC); h != "" && h != addr {
			hint = h
		}
	}
}

// callEnded is the call context's error once it has ended, or
// context.DeadlineExceeded once its deadline has passed even though the
// context's own timer has not fired yet: gRPC ends an attempt at the
// deadline from its own timer (or on the server's reset), which can run
// first, and that attempt's error then describes the deadline, not an
// answer.
func callEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// retryAfter returns the server's wait hint of an overloaded answer
// (ResourceExhausted with MDRetryAfter), capped by maxRetryAfter.
func retryAfter(err error, md metadata.MD) (time.Duration, bool) {
	if status.Code(err) != codes.ResourceExhausted {
		return 0, false
	}
	ms, perr := strconv.ParseInt(first(md, MDRetryAfter), 10, 64)
	if perr != nil || ms < 0 {
		return 0, false
	}
	return min(time.Duration(ms)*time.Millisecond, maxRetryAfter), true
}

// attempt makes one call on addr and returns the response metadata
// (header and trailer merged) and whether the request was handed to a
// connection (gRPC fills in the peer only for a call that got a stream:
// one that failed before, e.g. on a connection that was down, never left
// the client).
func (c *Client) attempt(ctx context.Context, addr string, fn rpcFunc, bounded bool) (metadata.MD, bool, error) {
	cc, err := c.conn(addr)
	if err != nil {
		return nil, false, err
	}
	if bounded && c.cfg.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.AttemptTimeout)
		defer cancel()
	}
	if err := c.waitReady(ctx, addr, cc); err != nil {
		return nil, false, err
	}
	var header, trailer metadata.MD
	var p peer.Peer
	err = fn(ctx, cc, grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p))
	return metadata.Join(header, trailer), p.Addr != nil, err
}

// classify tells whether err may be retried and whether the attempt's
// outcome is unknown. It is called only while the call's context is live,
// so DeadlineExceeded means one attempt (or the server) timed out. sent
// says the request was handed to a connection: an Unavailable that no
// coordd server marked is then a connection that broke under the call,
// which may have been delivered and applied.
func classify(err error, md metadata.MD, sent bool) (retry, unknownOutcome bool) {
	switch status.Code(err) {
	case codes.Unavailable:
		switch first(md, MDOutcome) {
		case OutcomeUnknown:
			return true, true
		case OutcomeNone:
			return true, false
		}
		return true, sent
	case codes.DeadlineExceeded:
		return true, true
	case codes.ResourceExhausted:
		// Retried only when the server says asking later may help; the
		// request was not submitted, so the outcome is known.
		_, ok := retryAfter(err, md)
		return ok, false
	default:
		return false, false
	}
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// sleep waits d less up to 20% jitter, or until ctx ends. It gives up at
// once when the deadline would pass first.
func sleep(ctx context.Context, d time.Duration) error {
	d -= time.Duration(rand.Int64N(int64(d)/5 + 1))
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return context.DeadlineExceeded
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
