package redial

import (
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
)

func TestParams(t *testing.T) {
	for _, tc := range []struct {
		min, want time.Duration
	}{{0, 20 * time.Second}, {-1, 20 * time.Second}, {3 * time.Second, 3 * time.Second}} {
		p := Params(tc.min)
		if p.MinConnectTimeout != tc.want {
			t.Errorf("Params(%v).MinConnectTimeout = %v, want %v", tc.min, p.MinConnectTimeout, tc.want)
		}
		if p.Backoff.MaxDelay != MaxDelay || p.Backoff.BaseDelay <= 0 || p.Backoff.BaseDelay > MaxDelay {
			t.Errorf("Params(%v).Backoff = %+v: want a first redial within MaxDelay (%v) and none later than it", tc.min, p.Backoff, MaxDelay)
		}
	}
}

// Wake leaves a connection that is not in transient failure as it is (an
// idle connection is not dialled by it), and accepts nil.
func TestWakeDialsOnlyAFailedConnection(t *testing.T) {
	Wake(nil)
	conn, err := grpc.NewClient("127.0.0.1:1", grpc.WithTransportCredentials(insecure.NewCredentials()), Option(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	Wake(conn)
	if s := conn.GetState(); s != connectivity.Idle {
		t.Fatalf("Wake of an idle connection left it %v, want Idle", s)
	}
}
