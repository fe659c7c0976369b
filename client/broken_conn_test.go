package client_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
)

// breakUnderCall is a hook that, on the node's first call, stops the
// node's server while the call is inside its handler: the request reached
// the server, and the answer is lost with the connection. Later calls
// answer with then.
func breakUnderCall(n *clienttest.Node, then clienttest.Hook) clienttest.Hook {
	return func(ctx context.Context, method string, call int) error {
		if call == 1 {
			go n.Stop()
			<-ctx.Done()
			return ctx.Err()
		}
		if then == nil {
			return nil
		}
		return then(ctx, method, call)
	}
}

func unauthenticated(context.Context, string, int) error {
	return status.Error(codes.Unauthenticated, "injected: unknown or revoked token")
}

// A connection that breaks after the request left the client is an
// unknown outcome (the write may have been applied), and the flag stays
// on the call's error whatever a later attempt answers; an endpoint the
// request never reached is not.
func TestBrokenConnectionIsAnUnknownOutcome(t *testing.T) {
	t.Run("mutation", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		n := fc.Nodes[0]
		n.SetHook(breakUnderCall(n, nil))
		c := newClient(t, client.Config{Endpoints: fc.Endpoints(), RequestTimeout: 500 * time.Millisecond})
		_, err := c.AddVoter(context.Background(), client.MemberSpec{ID: "n4", RaftAddr: "127.0.0.1:8004"})
		if err == nil || !client.IsOutcomeUnknown(err) {
			t.Fatalf("err = %v; want a failure flagged outcome unknown", err)
		}
	})
	t.Run("definitive answer after a broken connection keeps the flag", func(t *testing.T) {
		fc := clienttest.Start(t, 2)
		fc.Nodes[0].SetHook(breakUnderCall(fc.Nodes[0], nil))
		fc.Nodes[1].SetHook(unauthenticated)
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		_, _, err := c.AllocID(context.Background(), 1)
		if status.Code(err) != codes.Unauthenticated || !client.IsOutcomeUnknown(err) {
			t.Fatalf("err = %v; want Unauthenticated flagged outcome unknown", err)
		}
	})
	t.Run("an endpoint the request never reached", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		fc.Nodes[0].SetHook(unauthenticated)
		c := newClient(t, client.Config{Endpoints: []string{clienttest.DownAddr(t), fc.Nodes[0].Addr}})
		_, _, err := c.AllocID(context.Background(), 1)
		if status.Code(err) != codes.Unauthenticated || client.IsOutcomeUnknown(err) {
			t.Fatalf("err = %v; want Unauthenticated with a known outcome", err)
		}
	})
	t.Run("a server's unavailable marked none is not counted", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		fc.Nodes[0].SetHook(func(ctx context.Context, m string, call int) error {
			if call <= 3 {
				return unavailable(ctx, m, call)
			}
			return nil
		})
		// Three answers that did nothing, against a budget of one unknown
		// outcome: only a known outcome gets to the fourth attempt.
		c := newClient(t, client.Config{Endpoints: fc.Endpoints(), OutcomeUnknownRetries: 1})
		if _, err := c.AddVoter(context.Background(), client.MemberSpec{ID: "n4", RaftAddr: "127.0.0.1:8004"}); err != nil {
			t.Fatal(err)
		}
		if got := fc.Nodes[0].Calls("AddVoter"); got != 4 {
			t.Fatalf("AddVoter reached the server %d times, want 4", got)
		}
	})
}
