package grpcserver

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/testutil"
)

// TestWatcherCap: past the cap, WatchAssignments answers
// ResourceExhausted (and counts it); a closed stream frees its slot.
func TestWatcherCap(t *testing.T) {
	tn, _, _ := startBroadcastNode(t, WithMaxWatchers(2))
	ch := coordpb.NewChannelsClient(tn.conn)
	open := func(ctx context.Context) (coordpb.Channels_WatchAssignmentsClient, error) {
		st, err := ch.WatchAssignments(ctx, &coordpb.WatchAssignmentsRequest{})
		if err != nil {
			return nil, err
		}
		_, err = st.Recv()
		return st, err
	}
	var cancels []context.CancelFunc
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		cancels = append(cancels, cancel)
		defer cancel()
		if _, err := open(ctx); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
	}
	if _, err := open(callCtx(t)); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "(max 2)") {
		t.Fatalf("third stream: %v, want ResourceExhausted", err)
	}
	if l := tn.srv.Limits(); l.WatchersRefused != 1 || l.MaxWatchers != 2 {
		t.Fatalf("limits %+v", l)
	}
	cancels[0]()
	testutil.EventuallyWithin(t, 5*time.Second, "the closed stream's slot", func() bool { return tn.srv.Watchers() == 1 })
	if _, err := open(callCtx(t)); err != nil {
		t.Fatalf("a stream after one closed: %v", err)
	}
}

// TestUnknownConsistencyRefused: an enum number outside ReadConsistency is
// InvalidArgument on every read (it used to be served as STALE by Members
// and as LINEARIZABLE by the others).
func TestUnknownConsistencyRefused(t *testing.T) {
	tn, _, bc := startBroadcastNode(t)
	ch := coordpb.NewChannelsClient(tn.conn)
	bad := coordpb.ReadConsistency(99)
	calls := map[string]func() error{
		"Members": func() error {
			_, err := tn.cluster.Members(callCtx(t), &coordpb.MembersRequest{Consistency: bad})
			return err
		},
		"ListPChannels": func() error {
			_, err := ch.ListPChannels(callCtx(t), &coordpb.ListPChannelsRequest{Consistency: bad})
			return err
		},
		"ListNodes": func() error {
			_, err := ch.ListNodes(callCtx(t), &coordpb.ListNodesRequest{Consistency: bad})
			return err
		},
		"ListVirtualChannels": func() error {
			_, err := ch.ListVirtualChannels(callCtx(t), &coordpb.ListVirtualChannelsRequest{Consistency: bad})
			return err
		},
		"ListBroadcasts": func() error {
			_, err := bc.ListBroadcasts(callCtx(t), &coordpb.ListBroadcastsRequest{Consistency: bad})
			return err
		},
		"GetBroadcast": func() error {
			_, err := bc.GetBroadcast(callCtx(t), &coordpb.GetBroadcastRequest{BroadcastId: 1, Consistency: bad})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "consistency 99") {
			t.Errorf("%s with consistency 99: %v, want InvalidArgument", name, err)
		}
	}
}

// TestCapacityRefusalIsNot429: a deterministic capacity refusal (too few
// pchannels for the shards) is FailedPrecondition, 412 over HTTP, not a
// "retry later" 429.
func TestCapacityRefusalIsNot429(t *testing.T) {
	tn, _, _ := startBroadcastNode(t)
	_, err := coordpb.NewChannelsClient(tn.conn).AllocVirtualChannels(callCtx(t), &coordpb.AllocVirtualChannelsRequest{CollectionId: 5, Count: 9})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "needs 9 distinct pchannels") {
		t.Fatalf("err = %v, want FailedPrecondition", err)
	}
	if hs := HTTPStatus(status.Code(err)); hs != http.StatusPreconditionFailed {
		t.Fatalf("HTTP %d, want 412", hs)
	}
}

// TestInterceptorLogsInternalAndBoundsWaits: a call failing with Internal
// is logged with its request ID (the request's, else the caller's
// x-request-id, else a fresh one); other failures are not; every unary
// call runs under the server's maximum wait.
func TestInterceptorLogsInternalAndBoundsWaits(t *testing.T) {
	tn := startTestNodeWith(t, WithMaxWait(time.Second))
	var buf testutil.Buffer
	tn.srv.logger = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	icpt := tn.srv.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/coordd.v1.Channels/AllocVirtualChannels"}
	var deadline time.Duration
	failing := func(err error) grpc.UnaryHandler {
		return func(ctx context.Context, _ any) (any, error) {
			d, ok := ctx.Deadline()
			if !ok {
				t.Error("no server-side deadline")
			}
			deadline = time.Until(d)
			return nil, tn.srv.toStatus(ctx, err)
		}
	}
	_, _ = icpt(context.Background(), &coordpb.AllocVirtualChannelsRequest{RequestId: "req-77"}, info, failing(errors.New("disk on fire")))
	if deadline > time.Second {
		t.Errorf("deadline %v beyond the maximum wait", deadline)
	}
	if out := buf.String(); !strings.Contains(out, "request_id=req-77") || !strings.Contains(out, "disk on fire") || !strings.Contains(out, info.FullMethod) {
		t.Errorf("log %q: want the method, request ID and error", out)
	}
	before := buf.String()
	_, _ = icpt(context.Background(), &coordpb.AllocVirtualChannelsRequest{}, info, failing(errors.New("bolt is gone")))
	if out := strings.TrimPrefix(buf.String(), before); !strings.Contains(out, "request_id=req-") || !strings.Contains(out, "bolt is gone") {
		t.Errorf("log %q: want a generated request ID", out)
	}
	before = buf.String()
	_, _ = icpt(context.Background(), &coordpb.AllocVirtualChannelsRequest{}, info, failing(errInvalid))
	if buf.String() != before {
		t.Errorf("a non-Internal failure was logged: %q", strings.TrimPrefix(buf.String(), before))
	}
	if n := tn.srv.Limits().InternalFailures; n != 2 {
		t.Errorf("%d internal failures counted, want 2", n)
	}
}
