package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
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
	"github.com/coordd/coordd/controller/routines"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/vocab"
)

// trailerStream stands in for a gRPC server stream so toStatus's trailers
// can be inspected.
type trailerStream struct{ trailer metadata.MD }

func (s *trailerStream) Method() string               { return "/coordd.v1.Test/Call" }
func (s *trailerStream) SetHeader(metadata.MD) error  { return nil }
func (s *trailerStream) SendHeader(metadata.MD) error { return nil }
func (s *trailerStream) SetTrailer(md metadata.MD) error {
	s.trailer = metadata.Join(s.trailer, md)
	return nil
}

func TestToStatus(t *testing.T) {
	tn := startTestNode(t)
	type mdWant map[string]string // key → value; "" means absent
	// Every Unavailable that did nothing says so (OutcomeNone): the client
	// tells it from a connection that broke under its call by the mark.
	leaderMD := mdWant{MDLeaderID: tn.self.ID, MDLeaderGRPC: tn.self.GRPCAddr, MDOutcome: OutcomeNone, MDRetryAfter: ""}
	noMD := mdWant{MDLeaderID: "", MDLeaderGRPC: "", MDOutcome: "", MDRetryAfter: ""}
	tests := []struct {
		name string
		err  error
		code codes.Code
		md   mdWant
	}{
		{"outcome unknown", fmt.Errorf("propose X: %w: leadership lost", raftnode.ErrOutcomeUnknown), codes.Unavailable,
			mdWant{MDLeaderID: tn.self.ID, MDLeaderGRPC: tn.self.GRPCAddr, MDOutcome: "unknown"}},
		{"not leader", fmt.Errorf("add voter: %w", &raftnode.NotLeaderError{LeaderID: "n1"}), codes.Unavailable, leaderMD},
		{"not established", raftnode.ErrNotEstablished, codes.Unavailable, leaderMD},
		{"shutting down", raftnode.ErrShuttingDown, codes.Unavailable, leaderMD},
		{"allocator not leader", fmt.Errorf("allocator: %w", leadership.ErrNotLeader), codes.Unavailable, leaderMD},
		{"no leader", fmt.Errorf("cannot forward: %w", errNoLeader), codes.Unavailable, leaderMD},
		{"commands invalid", vocab.Errorf(commands.ErrInvalid, "member id too long"), codes.InvalidArgument, noMD},
		{"commands too large", vocab.Errorf(commands.ErrTooLarge, "entry is 9 MiB"), codes.InvalidArgument, noMD},
		{"vocabulary invalid", fmt.Errorf("transfer leader: %w", vocab.ValidateMemberID("a b")), codes.InvalidArgument, noMD},
		{"api invalid", vocab.Errorf(errInvalid, "count must be positive"), codes.InvalidArgument, noMD},
		{"api invalid, the old way", fmt.Errorf("%w: count must be positive", errInvalid), codes.InvalidArgument, noMD},
		{"not found", vocab.Errorf(errNotFound, "member ghost"), codes.NotFound, noMD},
		{"not found, the old way", fmt.Errorf("read: %w", fmt.Errorf("%w: member ghost", errNotFound)), codes.NotFound, noMD},
		{"precondition", vocab.Errorf(errPrecondition, "already leads"), codes.FailedPrecondition, noMD},
		{"data path precondition", vocab.Errorf(datapath.ErrPrecondition, "node 3 session is epoch 2"), codes.FailedPrecondition, noMD},
		{"data path without broadcaster", datapath.ErrNoBroadcaster, codes.Unavailable, leaderMD},
		{"deadline", fmt.Errorf("read: %w", context.DeadlineExceeded), codes.DeadlineExceeded, noMD},
		{"canceled", fmt.Errorf("read: %w", context.Canceled), codes.Canceled, noMD},
		{"broadcast refused", fmt.Errorf("broadcast: %w", &commands.RejectedError{Code: logpb.RejectCode_REJECT_CONFLICT, Message: "collection 5 already has 2 vchannels, not 3"}), codes.FailedPrecondition, noMD},
		{"broadcast lock wait", &broadcaster.LockTimeoutError{Key: "CollectionName:db:c@X", Waited: time.Second, Err: context.DeadlineExceeded}, codes.DeadlineExceeded, noMD},
		{"broadcast lock wait cancelled", &broadcaster.LockTimeoutError{Key: "CollectionName:db:c@X", Waited: time.Second, Err: context.Canceled}, codes.DeadlineExceeded, noMD},
		{"broadcast unknown", fmt.Errorf("broadcast 9: %w", broadcaster.ErrTaskNotFound), codes.NotFound, noMD},
		{"broadcast finished", fmt.Errorf("broadcast 9: %w", broadcaster.ErrTaskFinished), codes.FailedPrecondition, noMD},
		{"broadcast not primary", broadcaster.ErrNotPrimary, codes.FailedPrecondition, noMD},
		{"broadcaster not leader", fmt.Errorf("broadcaster: %w", leadership.ErrNotLeader), codes.Unavailable, leaderMD},
		{"broadcast abandoned", fmt.Errorf("%w: broadcast 9: operator", broadcaster.ErrAbandoned), codes.Aborted, noMD},
		{"replication secondary", fmt.Errorf("%w (cluster c1): change it on the primary", channels.ErrSecondary), codes.FailedPrecondition, noMD},
		{"configuration not installed", fmt.Errorf("%w: the broadcast completed", channels.ErrNotInstalled), codes.FailedPrecondition, noMD},
		{"streaming node gone", fmt.Errorf("%w: streaming node 3", channels.ErrNodeGone), codes.NotFound, noMD},
		{"unknown member", fmt.Errorf("%w: member \"ghost\" is not in the cluster", membership.ErrUnknownMember), codes.NotFound, noMD},
		{"membership refused", fmt.Errorf("%w: member n1 already leads", membership.ErrRefused), codes.FailedPrecondition, noMD},
		{"write path not leader", fmt.Errorf("assign: %w", flush.ErrNotLeader), codes.Unavailable, leaderMD},
		{"write path not owner", fmt.Errorf("%w: node 2 at term 1", flush.ErrNotOwner), codes.Aborted, noMD},
		{"write path invalid", vocab.Errorf(flush.ErrInvalid, "rows and bytes are both 0"), codes.InvalidArgument, noMD},
		{"write path not found", vocab.Errorf(flush.ErrNotFound, "collection 9"), codes.NotFound, noMD},
		{"manifest stale", fmt.Errorf("commit: %w", &manifest.StaleError{Segment: 5, Expected: 1, Current: 2}), codes.Aborted, noMD},
		{"manifest refused", &commands.RejectedError{Code: logpb.RejectCode_REJECT_NOT_FOUND, Message: "segment 5 is dropped"}, codes.NotFound, noMD},
		{"apply refused as invalid", fmt.Errorf("create segment: %w", &commands.RejectedError{Code: logpb.RejectCode_REJECT_INVALID, Message: "bad"}), codes.InvalidArgument, noMD},
		{"manifest not found", vocab.Errorf(manifest.ErrNotFound, "segment 5"), codes.NotFound, noMD},
		{"manifest no store", manifest.ErrNoStore, codes.FailedPrecondition, noMD},
		{"proposal queue full", fmt.Errorf("create broadcast: %w", &raftnode.OverloadedError{Pending: 64, Max: 64, RetryAfter: 250 * time.Millisecond}),
			codes.ResourceExhausted, mdWant{MDRetryAfter: "250", MDOutcome: "", MDLeaderID: ""}},
		{"state budget reached", fmt.Errorf("create segment: %w", &raftnode.StateBudgetError{Type: commands.TypeCreateSegment, Bytes: 2 << 30, Budget: 2 << 30}),
			codes.ResourceExhausted, mdWant{MDRetryAfter: "", MDOutcome: "", MDLeaderID: ""}},
		{"permission refused", fmt.Errorf("ack: %w", &commands.RejectedError{Code: logpb.RejectCode_REJECT_PERMISSION, Message: "session of node 3 is bound to another identity"}), codes.PermissionDenied, noMD},
		{"unknown error", errors.New("disk on fire"), codes.Internal, noMD},
		{"raft error", fmt.Errorf("transfer leadership: %w", raft.ErrLeadershipTransferInProgress), codes.Internal, noMD},
	}

	// Every class but one (ClassExists: no service returns it yet) is
	// the class of some case here, so a class cannot go untested.
	covered := map[vocab.Class]bool{}
	for _, tc := range tests {
		covered[classOf(tc.err)] = true
	}
	for _, c := range vocab.Classes() {
		if !covered[c] && c != vocab.ClassExists {
			t.Errorf("class %v has no test case", c)
		}
	}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := &trailerStream{}
			ctx := grpc.NewContextWithServerTransportStream(context.Background(), ts)
			err := tn.srv.toStatus(ctx, tc.err)
			st, ok := status.FromError(err)
			if !ok {
				t.Fatalf("toStatus returned a non-status error %v", err)
			}
			// The message is the error's public message, which never
			// starts with a kind's words (nor does a wrapped part of it).
			if want := publicMessage(tc.err); st.Code() != tc.code || st.Message() != want {
				t.Errorf("got %v %q; want %v %q", st.Code(), st.Message(), tc.code, want)
			}
			for _, k := range []error{commands.ErrInvalid, commands.ErrTooLarge, errNotFound, errPrecondition, manifest.ErrNotFound} {
				p := k.Error() + ": "
				if m := st.Message(); strings.HasPrefix(m, p) || strings.Contains(m, ": "+p) {
					t.Errorf("message %q carries %q", st.Message(), p)
				}
			}
			for k, want := range tc.md {
				var got string
				if v := ts.trailer.Get(k); len(v) > 0 {
					got = v[0]
				}
				if got != want {
					t.Errorf("trailer %s = %q; want %q", k, got, want)
				}
			}
			if hs := HTTPStatus(st.Code()); (hs == http.StatusInternalServerError) != (tc.code == codes.Internal) {
				t.Errorf("HTTPStatus(%v) = %d", st.Code(), hs)
			}
		})
	}

	t.Run("nil", func(t *testing.T) {
		if err := tn.srv.toStatus(context.Background(), nil); err != nil {
			t.Errorf("toStatus(nil) = %v", err)
		}
	})
	t.Run("status passes through", func(t *testing.T) {
		in := status.Error(codes.Aborted, "stale manifest")
		ts := &trailerStream{}
		err := tn.srv.toStatus(grpc.NewContextWithServerTransportStream(context.Background(), ts), in)
		if err != in {
			t.Errorf("toStatus(status) = %v; want the same error", err)
		}
		if len(ts.trailer) != 0 {
			t.Errorf("trailer %v set for a passed-through status", ts.trailer)
		}
	})
	t.Run("no trailer stream", func(t *testing.T) {
		// Outside a gRPC call (the HTTP gateway) trailers cannot be set;
		// the status must still come back.
		if st, _ := status.FromError(tn.srv.toStatus(context.Background(), raftnode.ErrShuttingDown)); st.Code() != codes.Unavailable {
			t.Errorf("code = %v; want Unavailable", st.Code())
		}
	})
}

// TestToStatusNoLeaderKnown: an Unavailable error from a node that knows no
// leader carries no leader hint.
func TestToStatusNoLeaderKnown(t *testing.T) {
	_, trans := raft.NewInmemTransport("127.0.0.1:3")
	node, err := raftnode.Open(raftnode.Config{ID: "lonely", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:3", Transport: trans, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	set, err := routines.New(node, routines.Config{})
	if err != nil {
		t.Fatalf("controllers: %v", err)
	}
	s := New(node, raftnode.Self{ID: "lonely", RaftAddr: "127.0.0.1:3"}, testLogger(t), set)
	defer func() {
		s.Close()
		if err := node.Shutdown(); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	}()
	ts := &trailerStream{}
	err = s.toStatus(grpc.NewContextWithServerTransportStream(context.Background(), ts), &raftnode.NotLeaderError{})
	if st, _ := status.FromError(err); st.Code() != codes.Unavailable {
		t.Errorf("code = %v; want Unavailable", st.Code())
	}
	if got := ts.trailer; len(got.Get(MDLeaderID)) != 0 || len(got.Get(MDLeaderGRPC)) != 0 || strings.Join(got.Get(MDOutcome), ",") != OutcomeNone {
		t.Errorf("trailer = %v; want no leader hint when no leader is known, and the outcome none", ts.trailer)
	}
}

// TestRejection: the one mapper gives every rejection code a gRPC code, and
// a refusal reaches the caller with that code and Apply's message however
// deep a controller wrapped it. A code added to the log schema fails here
// until it has a row.
func TestRejection(t *testing.T) {
	tn := startTestNode(t)
	want := map[logpb.RejectCode]codes.Code{
		logpb.RejectCode_REJECT_NONE:        codes.Internal, // a rejection must say why
		logpb.RejectCode_REJECT_INVALID:     codes.InvalidArgument,
		logpb.RejectCode_REJECT_NOT_FOUND:   codes.NotFound,
		logpb.RejectCode_REJECT_CONFLICT:    codes.FailedPrecondition,
		logpb.RejectCode_REJECT_STALE:       codes.Aborted,
		logpb.RejectCode_REJECT_EXHAUSTED:   codes.FailedPrecondition, // deterministic: not 429
		logpb.RejectCode_REJECT_NOT_PRIMARY: codes.FailedPrecondition,
		logpb.RejectCode_REJECT_PERMISSION:  codes.PermissionDenied,
		logpb.RejectCode_REJECT_ORDER:       codes.Aborted,
		logpb.RejectCode(99):                codes.Internal, // unknown to this binary
	}
	for n := range logpb.RejectCode_name {
		if _, ok := want[logpb.RejectCode(n)]; !ok {
			t.Errorf("reject code %v has no expectation here", logpb.RejectCode(n))
		}
	}
	for n := range logpb.RejectCode_name {
		if rc := logpb.RejectCode(n); rc != logpb.RejectCode_REJECT_NONE && commands.RejectClass(rc) == 0 {
			t.Errorf("reject code %v has no class (commands.RejectClass)", rc)
		}
	}
	for rc, code := range want {
		if got := rejectionCode(rc); got != code {
			t.Errorf("rejectionCode(%v) = %v; want %v", rc, got, code)
		}
		rej := commands.Rejected(&logpb.Rejection{Code: rc, Message: "because " + rc.String()})
		err := tn.srv.toStatus(context.Background(), fmt.Errorf("commit: %w", rej))
		st, ok := status.FromError(err)
		if !ok || st.Code() != code || st.Message() != "commit: because "+rc.String() {
			t.Errorf("toStatus(%v) = %v; want %v with the FSM's message", rc, err, code)
		}
	}
}

func TestHTTPStatus(t *testing.T) {
	want := map[codes.Code]int{
		codes.OK:                 http.StatusOK,
		codes.Canceled:           499,
		codes.Unknown:            http.StatusInternalServerError,
		codes.InvalidArgument:    http.StatusBadRequest,
		codes.DeadlineExceeded:   http.StatusGatewayTimeout,
		codes.NotFound:           http.StatusNotFound,
		codes.AlreadyExists:      http.StatusConflict,
		codes.PermissionDenied:   http.StatusForbidden,
		codes.ResourceExhausted:  http.StatusTooManyRequests,
		codes.FailedPrecondition: http.StatusPreconditionFailed,
		codes.Aborted:            http.StatusConflict,
		codes.OutOfRange:         http.StatusBadRequest,
		codes.Unimplemented:      http.StatusNotImplemented,
		codes.Internal:           http.StatusInternalServerError,
		codes.Unavailable:        http.StatusServiceUnavailable,
		codes.DataLoss:           http.StatusInternalServerError,
		codes.Unauthenticated:    http.StatusUnauthorized,
		codes.Code(99):           http.StatusInternalServerError,
	}
	for c := range httpStatus {
		if _, ok := want[c]; !ok {
			t.Errorf("httpStatus row %v has no expectation here", c)
		}
	}
	for c, hs := range want {
		if got := HTTPStatus(c); got != hs {
			t.Errorf("HTTPStatus(%v) = %d; want %d", c, got, hs)
		}
	}
}

// TestEveryClassHasARow: every error class has its row in classCodes, and
// its code an HTTP status of its own (a 4xx or 5xx other than the 500 of
// an unclassified error). A class added to vocab fails here until it has
// both.
func TestEveryClassHasARow(t *testing.T) {
	for _, c := range vocab.Classes() {
		code, ok := classCodes[c]
		if !ok {
			t.Errorf("class %v has no row in classCodes", c)
			continue
		}
		if hs := HTTPStatus(code); hs < 400 || hs == http.StatusInternalServerError {
			t.Errorf("class %v: code %v maps to HTTP %d", c, code, hs)
		}
		if got := classOf(fmt.Errorf("wrapped: %w", c.Sentinel())); got != c {
			t.Errorf("an error wrapping %v's sentinel reads as class %v", c, got)
		}
	}
	if len(classCodes) != len(vocab.Classes()) {
		t.Errorf("classCodes has %d rows for %d classes", len(classCodes), len(vocab.Classes()))
	}
}

// TestPublicMessage: an error made with vocab.Errorf is answered with its
// own text, through any wrapping; an error built the old way
// (fmt.Errorf("%w: detail", kind), legacyKinds) loses the kind's words
// where the error tree says they are, and nowhere else.
func TestPublicMessage(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{vocab.Errorf(manifest.ErrNotFound, "segment 5 does not exist"), "segment 5 does not exist"},
		{fmt.Errorf("read: %w", vocab.Errorf(errNotFound, "member ghost")), "read: member ghost"},
		{vocab.Errorf(errInvalid, "%w", vocab.ValidateMemberID("a b")), vocab.ValidateMemberID("a b").Error()},
		{vocab.Errorf(datapath.ErrPrecondition, "node 3 session is epoch 2"), "node 3 session is epoch 2"},
		{vocab.Errorf(datapath.ErrInvalid, "level must be L0, L1 or L2"), "level must be L0, L1 or L2"},
		// An error's own words are never cut, even when they read like a
		// kind's: only the tree says where a kind is.
		{errors.New("task not found: x"), "task not found: x"},
		{errors.New("invalid command: x"), "invalid command: x"},
		{vocab.Errorf(errInvalid, "not found: %s", "x"), "not found: x"},
		{fmt.Errorf("invalid command: %w", errors.New("x")), "invalid command: x"},
		{errors.New("nothing to strip"), "nothing to strip"},
		// The old way, still used by a few call sites (TestLegacyErrorSites).
		{fmt.Errorf("%w: member ghost", errNotFound), "member ghost"},
		{fmt.Errorf("read: %w", fmt.Errorf("%w: member ghost", errNotFound)), "read: member ghost"},
		{fmt.Errorf("%w: %w", commands.ErrInvalid, vocab.ValidateMemberID("a b")), vocab.ValidateMemberID("a b").Error()},
		{fmt.Errorf("create: %w", fmt.Errorf("%w: %w", errInvalid, fmt.Errorf("%w: x", errInvalid))), "create: x"},
		{fmt.Errorf("%w: the caller gave up: %w", errInvalid, context.Canceled), "the caller gave up: context canceled"},
		// Apply's refusals are recorded text: a part that is a kind's
		// words alone goes, other words stay.
		{fmt.Errorf("commit: %w", &commands.RejectedError{Code: logpb.RejectCode_REJECT_INVALID, Message: "invalid command: member id too long"}), "commit: member id too long"},
		{&commands.RejectedError{Code: logpb.RejectCode_REJECT_INVALID, Message: "segment 5: invalid command: stats key k: bad"}, "segment 5: stats key k: bad"},
		{&commands.RejectedError{Code: logpb.RejectCode_REJECT_NOT_FOUND, Message: "task not found: x"}, "task not found: x"},
		{&commands.RejectedError{Code: logpb.RejectCode_REJECT_INVALID, Message: "x: invalid command"}, "x: invalid command"},
		// A vocab.Errorf that wraps an error of the commands package with
		// %w reads it as the tree says.
		{vocab.Errorf(commands.ErrInvalid, "segment %d: %w", 5, fmt.Errorf("%w: bad key", commands.ErrInvalid)), "segment 5: bad key"},
		// A kind wrapped last, or not first, is the old "...: %w" form
		// that says what it is: it stays.
		{fmt.Errorf("member ghost: %w", errNotFound), "member ghost: not found"},
	} {
		if got := publicMessage(tc.err); got != tc.want {
			t.Errorf("publicMessage(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// rejectionCode maps a rejection code to its gRPC code, through its class
// (Internal for a code of no class).
func rejectionCode(c logpb.RejectCode) codes.Code { return codeOfClass(commands.RejectClass(c)) }
