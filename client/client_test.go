package client_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
)

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// unavailable is a server's Unavailable answer that did nothing (marked
// "coordd-outcome: none", as every coordd Unavailable is).
func unavailable(ctx context.Context, _ string, _ int) error {
	_ = grpc.SetTrailer(ctx, metadata.Pairs(client.MDOutcome, client.OutcomeNone))
	return status.Error(codes.Unavailable, "injected: unavailable")
}

func TestRetryUnavailableThenSuccess(t *testing.T) {
	fc := clienttest.Start(t, 1)
	n := fc.Nodes[0]
	n.SetHook(func(ctx context.Context, method string, call int) error {
		if call <= 2 {
			return unavailable(ctx, method, call)
		}
		return nil
	})
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	first, count, err := c.AllocID(context.Background(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if first != clienttest.FirstID || count != 5 {
		t.Fatalf("AllocID = %d, %d; want %d, 5", first, count, clienttest.FirstID)
	}
	if got := n.Calls("AllocID"); got != 3 {
		t.Fatalf("AllocID reached the server %d times, want 3", got)
	}
}

func TestLeaderHintFollowed(t *testing.T) {
	for _, inHeader := range []bool{false, true} {
		name := map[bool]string{false: "trailer", true: "header"}[inHeader]
		t.Run(name, func(t *testing.T) {
			fc := clienttest.Start(t, 2)
			follower, leader := fc.Nodes[0], fc.Nodes[1]
			fc.SetLeader(1)
			fc.SetForwarding(false)
			follower.SetHook(func(ctx context.Context, method string, call int) error {
				if method == "Status" {
					return nil
				}
				return clienttest.NotLeader(ctx, leader.ID, leader.Addr, inHeader)
			})
			// The client only knows the follower.
			c := newClient(t, client.Config{Endpoints: []string{follower.Addr}})
			if _, _, err := c.AllocTimestamp(context.Background(), 3); err != nil {
				t.Fatal(err)
			}
			if f, l := follower.Calls("AllocTimestamp"), leader.Calls("AllocTimestamp"); f != 1 || l != 1 {
				t.Fatalf("calls: follower %d, leader %d; want 1, 1", f, l)
			}
			if eps := c.Endpoints(); !slices.Contains(eps, leader.Addr) {
				t.Fatalf("leader %s not added to the pool %v", leader.Addr, eps)
			}
			// The next call starts at the leader, the endpoint that worked.
			if _, _, err := c.AllocTimestamp(context.Background(), 3); err != nil {
				t.Fatal(err)
			}
			if f, l := follower.Calls("AllocTimestamp"), leader.Calls("AllocTimestamp"); f != 1 || l != 2 {
				t.Fatalf("calls after second call: follower %d, leader %d; want 1, 2", f, l)
			}
		})
	}
}

func TestDefinitiveErrorsNotRetried(t *testing.T) {
	for _, code := range []codes.Code{
		codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition,
		codes.AlreadyExists, codes.Aborted, codes.ResourceExhausted,
		codes.PermissionDenied, codes.Internal,
	} {
		t.Run(code.String(), func(t *testing.T) {
			fc := clienttest.Start(t, 3)
			for _, n := range fc.Nodes {
				n.SetHook(func(context.Context, string, int) error {
					return status.Error(code, "injected")
				})
			}
			c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
			calls := map[string]func() error{
				"AllocID": func() error { _, _, err := c.AllocID(context.Background(), 1); return err },
				"AddVoter": func() error {
					_, err := c.AddVoter(context.Background(), client.MemberSpec{ID: "n9", RaftAddr: "127.0.0.1:8009"})
					return err
				},
				"Status": func() error { _, err := c.Status(context.Background()); return err },
			}
			for method, call := range calls {
				err := call()
				if status.Code(err) != code {
					t.Fatalf("%s: code %v, want %v (err %v)", method, status.Code(err), code, err)
				}
				var ce *client.Error
				if !errors.As(err, &ce) || ce.Attempts != 1 {
					t.Fatalf("%s: want *client.Error with 1 attempt, got %#v", method, err)
				}
				total := 0
				for _, n := range fc.Nodes {
					total += n.Calls(method)
				}
				if total != 1 {
					t.Fatalf("%s reached servers %d times, want 1", method, total)
				}
			}
		})
	}
}

func TestDeadlineHonoured(t *testing.T) {
	fc := clienttest.Start(t, 1)
	n := fc.Nodes[0]

	check := func(t *testing.T, c *client.Client, ctx context.Context, bound time.Duration) {
		t.Helper()
		start := time.Now()
		_, err := c.Status(ctx)
		took := time.Since(start)
		if err == nil {
			t.Fatal("Status succeeded, want an error")
		}
		if took > bound+400*time.Millisecond {
			t.Fatalf("Status took %v, bound %v", took, bound)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want it to wrap context.DeadlineExceeded", err)
		}
	}

	t.Run("caller deadline, always unavailable", func(t *testing.T) {
		n.SetHook(unavailable)
		before := n.Calls("Status")
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		check(t, c, ctx, 300*time.Millisecond)
		// Backoff 20, 40, 80, 160 ms (less jitter): a handful of
		// attempts, not a busy loop.
		if got := n.Calls("Status") - before; got < 2 || got > 10 {
			t.Fatalf("%d attempts in 300ms; want 2..10 with exponential backoff", got)
		}
	})
	t.Run("RequestTimeout, always unavailable", func(t *testing.T) {
		n.SetHook(unavailable)
		c := newClient(t, client.Config{Endpoints: fc.Endpoints(), RequestTimeout: 300 * time.Millisecond})
		check(t, c, context.Background(), 300*time.Millisecond)
	})
	t.Run("server hangs", func(t *testing.T) {
		n.SetHook(func(ctx context.Context, _ string, _ int) error {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		})
		c := newClient(t, client.Config{Endpoints: fc.Endpoints(), RequestTimeout: 300 * time.Millisecond, AttemptTimeout: -1})
		check(t, c, context.Background(), 300*time.Millisecond)
	})
	t.Run("attempt timeout moves on", func(t *testing.T) {
		fc := clienttest.Start(t, 2)
		fc.Nodes[0].SetHook(func(ctx context.Context, _ string, _ int) error {
			<-ctx.Done()
			return status.FromContextError(ctx.Err()).Err()
		})
		c := newClient(t, client.Config{Endpoints: fc.Endpoints(), AttemptTimeout: 100 * time.Millisecond})
		start := time.Now()
		if _, _, err := c.AllocID(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("AllocID took %v", took)
		}
		if got := fc.Nodes[1].Calls("AllocID"); got != 1 {
			t.Fatalf("second node saw %d calls, want 1", got)
		}
	})
}

func TestEndpointFailover(t *testing.T) {
	t.Run("first endpoint down", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		c := newClient(t, client.Config{Endpoints: []string{clienttest.DownAddr(t), fc.Nodes[0].Addr}})
		st, err := c.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.GetNodeId() != "n1" {
			t.Fatalf("answered by %q", st.GetNodeId())
		}
		if got := fc.Nodes[0].Calls("Status"); got != 1 {
			t.Fatalf("live endpoint saw %d calls, want 1", got)
		}
	})
	t.Run("first endpoint stopped", func(t *testing.T) {
		fc := clienttest.Start(t, 3)
		fc.Nodes[0].Stop()
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		if _, err := c.Members(context.Background(), coordpb.ReadConsistency_STALE); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("starts at the last endpoint that worked", func(t *testing.T) {
		fc := clienttest.Start(t, 2)
		fc.Nodes[0].SetHook(func(ctx context.Context, m string, call int) error {
			if call == 1 {
				return unavailable(ctx, m, call)
			}
			return nil
		})
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		for i := 0; i < 3; i++ {
			if _, err := c.Status(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if a, b := fc.Nodes[0].Calls("Status"), fc.Nodes[1].Calls("Status"); a != 1 || b != 3 {
			t.Fatalf("calls: %d, %d; want 1, 3", a, b)
		}
	})
	t.Run("all down", func(t *testing.T) {
		c := newClient(t, client.Config{
			Endpoints:      []string{clienttest.DownAddr(t), clienttest.DownAddr(t)},
			RequestTimeout: 300 * time.Millisecond,
		})
		_, err := c.Status(context.Background())
		if status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestMaxRetries(t *testing.T) {
	fc := clienttest.Start(t, 1)
	fc.Nodes[0].SetHook(unavailable)
	c := newClient(t, client.Config{Endpoints: fc.Endpoints(), MaxRetries: 2})
	_, err := c.Status(context.Background())
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Attempts != 3 || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v; want Unavailable after 3 attempts", err)
	}
	if got := fc.Nodes[0].Calls("Status"); got != 3 {
		t.Fatalf("%d calls, want 3", got)
	}
}

func TestOutcomeUnknown(t *testing.T) {
	t.Run("membership change retried within budget", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		fc.Nodes[0].SetHook(func(ctx context.Context, _ string, _ int) error { return clienttest.OutcomeUnknown(ctx) })
		c := newClient(t, client.Config{Endpoints: fc.Endpoints(), OutcomeUnknownRetries: 2})
		_, err := c.AddVoter(context.Background(), client.MemberSpec{ID: "n4", RaftAddr: "127.0.0.1:8004"})
		if !client.IsOutcomeUnknown(err) || status.Code(err) != codes.Unavailable {
			t.Fatalf("err = %v; want outcome unknown", err)
		}
		if got := fc.Nodes[0].Calls("AddVoter"); got != 3 {
			t.Fatalf("AddVoter reached the server %d times, want 1 + 2 retries", got)
		}
	})
	t.Run("untargeted transfer never retried", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		fc.Nodes[0].SetHook(func(ctx context.Context, _ string, _ int) error { return clienttest.OutcomeUnknown(ctx) })
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		_, err := c.TransferLeader(context.Background(), "")
		if !client.IsOutcomeUnknown(err) {
			t.Fatalf("err = %v; want outcome unknown", err)
		}
		if got := fc.Nodes[0].Calls("TransferLeader"); got != 1 {
			t.Fatalf("TransferLeader reached the server %d times, want 1", got)
		}
	})
	t.Run("allocation retried until it succeeds", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		fc.Nodes[0].SetHook(func(ctx context.Context, _ string, call int) error {
			if call <= 3 {
				return clienttest.OutcomeUnknown(ctx)
			}
			return nil
		})
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		if _, _, err := c.AllocTimestamp(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		if got := fc.Nodes[0].Calls("AllocTimestamp"); got != 4 {
			t.Fatalf("%d calls, want 4", got)
		}
	})
	t.Run("definitive answer after an unknown outcome keeps the flag", func(t *testing.T) {
		fc := clienttest.Start(t, 3)
		leader := fc.Nodes[0]
		leader.SetHook(func(ctx context.Context, _ string, call int) error {
			if call == 1 { // the removal happens, but the answer is lost
				if _, err := leader.RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: "n3"}); err != nil {
					t.Error(err)
				}
				return clienttest.OutcomeUnknown(ctx)
			}
			return nil
		})
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		_, err := c.RemoveMember(context.Background(), "n3")
		if status.Code(err) != codes.NotFound || !client.IsOutcomeUnknown(err) {
			t.Fatalf("err = %v; want NotFound flagged outcome unknown", err)
		}
	})
}

func TestSnapshotFromLeader(t *testing.T) {
	fc := clienttest.Start(t, 3)
	fc.SetLeader(2)
	want := bytes.Repeat([]byte("snapshot-bytes."), 50)
	fc.SetSnapshot(want)
	// Only a follower is configured: the client must find the leader.
	c := newClient(t, client.Config{Endpoints: []string{fc.Nodes[0].Addr}})
	var buf bytes.Buffer
	info, err := c.Snapshot(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) || info.Bytes != int64(len(want)) {
		t.Fatalf("got %d bytes (info %d), want %d", buf.Len(), info.Bytes, len(want))
	}
	if info.LeaderID != "n3" || info.Endpoint != fc.Nodes[2].Addr {
		t.Fatalf("info = %+v", info)
	}
	if a, b := fc.Nodes[0].Calls("Snapshot"), fc.Nodes[2].Calls("Snapshot"); a != 0 || b != 1 {
		t.Fatalf("Snapshot calls: follower %d, leader %d", a, b)
	}
}

func TestSnapshotWaitsForLeader(t *testing.T) {
	fc := clienttest.Start(t, 2)
	fc.SetLeader(-1)
	fc.Nodes[0].SetHook(func(_ context.Context, m string, call int) error {
		if m == "Status" && call == 2 {
			fc.SetLeader(1)
		}
		return nil
	})
	c := newClient(t, client.Config{Endpoints: []string{fc.Nodes[0].Addr}})
	var buf bytes.Buffer
	info, err := c.Snapshot(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if info.LeaderID != "n2" || buf.Len() == 0 {
		t.Fatalf("info = %+v, %d bytes", info, buf.Len())
	}
}

func TestTypedCalls(t *testing.T) {
	fc := clienttest.Start(t, 3)
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	ctx := context.Background()
	ms, err := c.AddVoter(ctx, client.MemberSpec{ID: "n4", RaftAddr: "127.0.0.1:8004", GRPCAddr: "127.0.0.1:7004"})
	if err != nil || len(ms) != 4 {
		t.Fatalf("AddVoter: %d members, %v", len(ms), err)
	}
	ms, err = c.RemoveMember(ctx, "n4")
	if err != nil || len(ms) != 3 {
		t.Fatalf("RemoveMember: %d members, %v", len(ms), err)
	}
	tr, err := c.TransferLeader(ctx, "n2")
	if err != nil || tr.GetLeaderId() != "n2" {
		t.Fatalf("TransferLeader: %v, %v", tr, err)
	}
	ms, err = c.Members(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil || len(ms) != 3 || !ms[1].GetLeader() {
		t.Fatalf("Members: %v, %v", ms, err)
	}
	if err := c.RegisterMember(ctx, client.MemberSpec{ID: "n1", RaftAddr: "127.0.0.1:8001"}); err != nil {
		t.Fatal(err)
	}
	a, _, err := c.AllocID(ctx, 10)
	b, _, err2 := c.AllocID(ctx, 1)
	if err != nil || err2 != nil || b != a+10 {
		t.Fatalf("AllocID: %d then %d (%v, %v)", a, b, err, err2)
	}
	if _, _, err := c.AllocID(ctx, 0); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("AllocID(0): %v", err)
	}
	if _, _, err := c.AllocTimestamp(ctx, client.MaxAllocCount+1); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("AllocTimestamp(max+1): %v", err)
	}
}

func TestConfigAndClose(t *testing.T) {
	for _, eps := range [][]string{nil, {""}, {"localhost"}, {"127.0.0.1:0"}, {"127.0.0.1:99999"}, {":7001"}} {
		if _, err := client.New(context.Background(), client.Config{Endpoints: eps}); err == nil {
			t.Errorf("New(%q) succeeded, want an error", eps)
		}
	}
	c, err := client.New(context.Background(), client.Config{Endpoints: []string{"127.0.0.1:7001", " 127.0.0.1:7001"}})
	if err != nil {
		t.Fatal(err)
	}
	if eps := c.Endpoints(); len(eps) != 1 {
		t.Fatalf("duplicates kept: %v", eps)
	}
	c.Close()
	if _, err := c.Status(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestOverloadedRetriedAfterHint: ResourceExhausted with a retry hint (a
// full proposal queue; nothing was done) is retried, by writes too, after
// at least the hinted wait; one that never clears ends at the caller's
// deadline, without starting a wait that would outlast it, and reports
// ResourceExhausted. Without the hint it stays definitive
// (TestDefinitiveErrorsNotRetried).
func TestOverloadedRetriedAfterHint(t *testing.T) {
	const hint = 150 * time.Millisecond
	t.Run("clears", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		n := fc.Nodes[0]
		n.SetHook(func(ctx context.Context, _ string, call int) error {
			if call <= 2 {
				return clienttest.Overloaded(ctx, hint)
			}
			return nil
		})
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		start := time.Now()
		if _, err := c.AddVoter(context.Background(), client.MemberSpec{ID: "n9", RaftAddr: "127.0.0.1:8009"}); err != nil {
			t.Fatal(err)
		}
		// Two waits of at least the hint, less the client's 20% jitter.
		if took := time.Since(start); took < 2*hint*8/10 {
			t.Fatalf("AddVoter succeeded after %v; the two overloaded answers asked for %v each", took, hint)
		}
		if got := n.Calls("AddVoter"); got != 3 {
			t.Fatalf("AddVoter reached the server %d times, want 3", got)
		}
	})
	t.Run("never clears", func(t *testing.T) {
		fc := clienttest.Start(t, 1)
		n := fc.Nodes[0]
		n.SetHook(func(ctx context.Context, _ string, _ int) error { return clienttest.Overloaded(ctx, hint) })
		c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := c.AllocID(ctx, 1)
		took := time.Since(start)
		var ce *client.Error
		if status.Code(err) != codes.ResourceExhausted || !errors.As(err, &ce) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v; want ResourceExhausted, stopped by the deadline", err)
		}
		if took > 500*time.Millisecond+400*time.Millisecond {
			t.Fatalf("gave up after %v, deadline 500ms", took)
		}
		// Waits of at least 150ms in 500ms: at most 4 attempts.
		if ce.Attempts < 2 || ce.Attempts > 4 || n.Calls("AllocID") != ce.Attempts {
			t.Fatalf("%d attempts (%d calls) in 500ms with a %v hint; want 2..4", ce.Attempts, n.Calls("AllocID"), hint)
		}
	})
}
