package grpcserver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/controller/manifest"
	"github.com/coordd/coordd/controller/membership"
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

// errorRule maps one class of internal error to a gRPC code (codeOf, when
// set, picks the code from the error). The table is the only place
// internal errors cross into the API.
type errorRule struct {
	match  func(error) bool
	code   codes.Code
	codeOf func(error) codes.Code
}

// codeFor is the code the rule gives err.
func (r errorRule) codeFor(err error) codes.Code {
	if r.codeOf != nil {
		return r.codeOf(err)
	}
	return r.code
}

func is(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }

func as[T error]() func(error) bool {
	return func(err error) bool {
		var t T
		return errors.As(err, &t)
	}
}

// rejectedCode is the code of a refusal (a *commands.RejectedError: Apply's,
// or a controller's fail-fast check of the same class).
func rejectedCode(err error) codes.Code {
	var rej *commands.RejectedError
	errors.As(err, &rej)
	return rejectionCode(rej.Code)
}

// rejectionCode maps a rejection code to its gRPC code (rejectionCodes;
// Internal for a code it does not know).
func rejectionCode(c logpb.RejectCode) codes.Code {
	if code, ok := rejectionCodes[c]; ok {
		return code
	}
	return codes.Internal
}

// errorTable is tried in order. A refusal, whichever controller reports
// it, is a *commands.RejectedError and takes its code from rejectionCodes
// (broadcaster.ErrNotPrimary and manifest.ErrNotFound are of that type);
// only a manifest *StaleError has a type of its own, for the versions it
// carries.
var errorTable = []errorRule{
	{match: as[*commands.RejectedError](), codeOf: rejectedCode},
	{match: as[*manifest.StaleError](), code: codes.Aborted},
	{match: as[*broadcaster.LockTimeoutError](), code: codes.DeadlineExceeded},
	{match: is(broadcaster.ErrTaskNotFound), code: codes.NotFound},
	{match: is(broadcaster.ErrTaskFinished), code: codes.FailedPrecondition},
	{match: is(broadcaster.ErrAbandoned), code: codes.Aborted},
	{match: is(raftnode.ErrOverloaded), code: codes.ResourceExhausted},
	// The memory guard: nothing was done, and asking again gets the same
	// answer until drops bring the state under its budget, so no
	// MDRetryAfter (docs/operations.md#memory-guard).
	{match: is(raftnode.ErrStateBudget), code: codes.ResourceExhausted},
	{match: is(leadership.ErrOutcomeUnknown), code: codes.Unavailable},
	{match: is(leadership.ErrNotLeader), code: codes.Unavailable},
	{match: is(leadership.ErrNotEstablished), code: codes.Unavailable},
	{match: is(raftnode.ErrShuttingDown), code: codes.Unavailable},
	{match: is(errNoLeader), code: codes.Unavailable},
	{match: is(channels.ErrSecondary), code: codes.FailedPrecondition},
	{match: is(channels.ErrNotInstalled), code: codes.FailedPrecondition},
	{match: is(channels.ErrNodeGone), code: codes.NotFound},
	{match: is(membership.ErrUnknownMember), code: codes.NotFound},
	{match: is(membership.ErrRefused), code: codes.FailedPrecondition},
	{match: is(flush.ErrNotOwner), code: codes.Aborted},
	{match: is(flush.ErrNotFound), code: codes.NotFound},
	{match: is(manifest.ErrNoStore), code: codes.FailedPrecondition},
	{match: is(commands.ErrInvalid), code: codes.InvalidArgument},
	{match: is(vocab.ErrInvalid), code: codes.InvalidArgument},
	{match: is(commands.ErrTooLarge), code: codes.InvalidArgument},
	{match: is(errNotFound), code: codes.NotFound},
	{match: is(errPrecondition), code: codes.FailedPrecondition},
	{match: is(datapath.ErrPrecondition), code: codes.FailedPrecondition},
	{match: is(datapath.ErrNoBroadcaster), code: codes.Unavailable},
	{match: is(context.DeadlineExceeded), code: codes.DeadlineExceeded},
	{match: is(context.Canceled), code: codes.Canceled},
}

// rejectionCodes maps FSM rejections (deterministic, state-dependent
// refusals) to gRPC codes.
var rejectionCodes = map[logpb.RejectCode]codes.Code{
	logpb.RejectCode_REJECT_INVALID:   codes.InvalidArgument,
	logpb.RejectCode_REJECT_NOT_FOUND: codes.NotFound,
	logpb.RejectCode_REJECT_CONFLICT:  codes.FailedPrecondition,
	logpb.RejectCode_REJECT_STALE:     codes.Aborted,
	// A capacity refusal is deterministic on the current state (asking
	// again gets the same answer), not "retry later".
	logpb.RejectCode_REJECT_EXHAUSTED:   codes.FailedPrecondition,
	logpb.RejectCode_REJECT_NOT_PRIMARY: codes.FailedPrecondition,
	logpb.RejectCode_REJECT_PERMISSION:  codes.PermissionDenied,
	logpb.RejectCode_REJECT_ORDER:       codes.Aborted,
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
	errNoLeader = errors.New("no leader is known")
	// errInvalid is commands.ErrInvalid, the one "invalid" sentinel, under
	// the short name the handlers' argument checks use: bad input is one
	// error class whichever layer finds it, with one row in errorTable.
	errInvalid      = commands.ErrInvalid
	errNotFound     = errors.New("not found")
	errPrecondition = errors.New("failed precondition")
)

// classifyError is err's gRPC code (errorTable, Internal when no row
// matches) and the outcome mark its answer carries: OutcomeUnknown
// whenever err wraps leadership.ErrOutcomeUnknown, whatever its code (one
// rule for every path, docs/semantics.md#error-classes), OutcomeNone for
// every other Unavailable, "" otherwise.
func classifyError(err error) (codes.Code, string) {
	code := codes.Internal
	for _, r := range errorTable {
		if r.match(err) {
			code = r.codeFor(err)
			break
		}
	}
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
// the leader hint and the outcome marker as trailer metadata.
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
	return status.Error(code, publicMessage(err.Error()))
}

// internalPrefixes are the texts of the sentinel errors wrapped into
// messages ("invalid command: ..."); the code already says as much, so
// the message a caller sees leaves them out.
var internalPrefixes = []string{
	commands.ErrInvalid.Error() + ": ", commands.ErrTooLarge.Error() + ": ",
	errNotFound.Error() + ": ", errPrecondition.Error() + ": ",
	manifest.ErrNotFound.Error() + ": ",
}

// publicMessage is msg without the internal sentinel prefixes, wherever
// they start a message or a wrapped part of one (nested errors repeat
// them); inside other words they stay ("segment not found: ..." keeps its
// subject).
func publicMessage(msg string) string {
	for _, p := range internalPrefixes {
		var b strings.Builder
		rest := msg
		for {
			i := strings.Index(rest, p)
			if i < 0 {
				b.WriteString(rest)
				break
			}
			done := b.String() + rest[:i]
			if done == "" || strings.HasSuffix(done, ": ") {
				b.WriteString(rest[:i])
			} else {
				b.WriteString(rest[:i+len(p)])
			}
			rest = rest[i+len(p):]
		}
		msg = b.String()
	}
	return msg
}
