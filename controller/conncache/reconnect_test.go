package conncache

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// A streaming node that comes back at the address it had is reached by the
// next call of a caller that retries, even after the connection has failed
// to dial it for seconds. Old code: gRPC's own reconnect backoff (1 s,
// growing to 120 s) failed every call at once until it ran out, so after
// 3 s of refused dials the node was unreachable for 1.6 s or more after
// it was back (jepsen channels-3-r04 seed 676910510: a broadcast's appends
// to a restarted node failed for the rest of the run).
func TestANodeBackAtItsAddressIsReachedAtOnce(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close() // the node is down: dials are refused

	c := New(0, nil)
	defer c.Close()
	check := func() error {
		conn, err := c.Get(addr)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	// Calls keep failing for 3 s while the node is down, so that gRPC's
	// own backoff (old code) has grown past a second.
	for down := time.Now(); time.Since(down) < 3*time.Second; {
		if err := check(); err == nil {
			t.Fatal("a call to a closed port succeeded")
		}
		time.Sleep(50 * time.Millisecond) // not a wait: a caller's retry pace
	}

	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen again at %s: %v", addr, err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	back := time.Now()
	for {
		err := check()
		if err == nil {
			t.Logf("reached %v after the node came back", time.Since(back).Round(time.Millisecond))
			return
		}
		if time.Since(back) > 800*time.Millisecond {
			t.Fatalf("the node has been back for %v and calls still fail: %v", time.Since(back).Round(time.Millisecond), err)
		}
		time.Sleep(50 * time.Millisecond) // not a wait: a caller's retry pace; the bound above is what is tested, unscaled
	}
}
