package grpcserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/vocab"
)

// Metadata keys coordd sets on errors so clients can find the leader and
// tell "maybe done" from "not done".
const (
	MDLeaderID   = "coordd-leader-id"
	MDLeaderGRPC = "coordd-leader-grpc"
	MDOutcome    = "coordd-outcome" // OutcomeUnknown or OutcomeNone on an Unavailable answer
	MDForwarded  = "coordd-forwarded"
	// MDRetryAfter is set (milliseconds) on a ResourceExhausted answer
	// that asking again later may change: the member's proposal queue
	// was full. The client SDK retries such answers after at least this
	// long; a ResourceExhausted without it is not worth retrying as is.
	MDRetryAfter = "coordd-retry-after-ms"
)

// The values of MDOutcome. Every Unavailable answer carries one, so a
// client can tell it from a connection that broke under its call (no
// mark: the request may have been applied).
const (
	OutcomeUnknown = "unknown" // the write may or may not have been committed
	OutcomeNone    = "none"    // nothing was submitted
)

// classCodes is the one table from error classes to gRPC codes (and, by
// httpStatus, to HTTP statuses): every error a service returns is of one
// vocab.Class (its package marks its sentinels with vocab.NewSentinel, a
// refusal's code has its class, commands.RejectClass), so a new service
// adds no row here. TestEveryClassHasARow fails on a class without one.
var classCodes = map[vocab.Class]codes.Code{
	vocab.ClassConflict:     codes.Aborted,
	vocab.ClassNotFound:     codes.NotFound,
	vocab.ClassExists:       codes.AlreadyExists,
	vocab.ClassPrecondition: codes.FailedPrecondition,
	// The proposal queue (with MDRetryAfter, toStatus) and the memory
	// guard (without: asking again gets the same answer until drops bring
	// the state under its budget, docs/operations.md#memory-guard).
	vocab.ClassExhausted:   codes.ResourceExhausted,
	vocab.ClassUnavailable: codes.Unavailable,
	vocab.ClassPermission:  codes.PermissionDenied,
	vocab.ClassInvalid:     codes.InvalidArgument,
	vocab.ClassTimeout:     codes.DeadlineExceeded,
	vocab.ClassCanceled:    codes.Canceled,
}

// classOf is err's class: vocab.ClassOf, else the class of the standard
// library's context errors, which carry none of their own (0: none).
func classOf(err error) vocab.Class {
	if c := vocab.ClassOf(err); c != 0 {
		return c
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return vocab.ClassTimeout
	case errors.Is(err, context.Canceled):
		return vocab.ClassCanceled
	}
	return 0
}

// codeOfClass is c's gRPC code (Internal for an error of no class).
func codeOfClass(c vocab.Class) codes.Code {
	if code, ok := classCodes[c]; ok {
		return code
	}
	return codes.Internal
}

// httpStatus maps gRPC codes to HTTP statuses for the JSON gateway.
var httpStatus = map[codes.Code]int{
	codes.OK:                 http.StatusOK,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.FailedPrecondition: http.StatusPreconditionFailed,
	codes.Aborted:            http.StatusConflict,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.Canceled:           499,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.OutOfRange:         http.StatusBadRequest,
}

// HTTPStatus returns the HTTP status for a gRPC code.
func HTTPStatus(c codes.Code) int {
	if s, ok := httpStatus[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

var (
	errNoLeader = vocab.NewSentinel(vocab.ClassUnavailable, "no leader is known")
	// errInvalid is vocab.ErrInvalidCommand (commands.ErrInvalid), the one
	// "invalid" sentinel, under the short name the handlers' argument
	// checks use: bad input is one error class whichever layer finds it,
	// with one row in classCodes.
	errInvalid      = vocab.ErrInvalidCommand
	errNotFound     = vocab.ErrNotFound
	errPrecondition = vocab.ErrPrecondition
)

// classifyError is err's gRPC code (its class's row in classCodes,
// Internal for an error of no class) and the outcome mark its answer carries: OutcomeUnknown
// whenever err wraps leadership.ErrOutcomeUnknown, whatever its code (one
// rule for every path, docs/semantics.md#error-classes), OutcomeNone for
// every other Unavailable, "" otherwise.
func classifyError(err error) (codes.Code, string) {
	code := codeOfClass(classOf(err))
	switch {
	case errors.Is(err, leadership.ErrOutcomeUnknown):
		return code, OutcomeUnknown
	case code == codes.Unavailable:
		// Every other Unavailable is answered before anything was
		// submitted; the mark tells the client so, which an Unavailable
		// from a connection that broke under the call cannot.
		return code, OutcomeNone
	}
	return code, ""
}

// toStatus converts an internal error into a gRPC status error, attaching
// the leader hint and the outcome marker as trailer metadata. The status
// message is the error's public message (publicMessage): its own text,
// for an error of a class is made with vocab.Errorf, whose text leaves
// the class's words to the code. The HTTP gateway answers with the same
// message and the code's row in httpStatus.
func (s *Server) toStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err // already a status (e.g. from a forwarded call)
	}
	code, outcome := classifyError(err)
	md := metadata.MD{}
	if outcome != "" {
		md.Set(MDOutcome, outcome)
	}
	var oe *raftnode.OverloadedError
	if errors.As(err, &oe) {
		md.Set(MDRetryAfter, strconv.FormatInt(max(oe.RetryAfter.Milliseconds(), 1), 10))
	}
	if code == codes.Unavailable {
		if id, addr := s.leaderHint(); id != "" {
			md.Set(MDLeaderID, id)
			if addr != "" {
				md.Set(MDLeaderGRPC, addr)
			}
		}
	}
	if len(md) > 0 {
		_ = grpc.SetTrailer(ctx, md)
	}
	return status.Error(code, publicMessage(err))
}
