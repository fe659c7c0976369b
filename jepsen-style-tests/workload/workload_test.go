package workload

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want history.Type
	}{
		{nil, history.Ok},
		{status.Error(codes.InvalidArgument, "bad count"), history.Fail},
		{&client.Error{Op: "x", Err: status.Error(codes.FailedPrecondition, "no")}, history.Fail},
		{status.Error(codes.Unavailable, "connection reset"), history.Info},
		{&client.Error{Op: "x", Err: status.Error(codes.Unavailable, "no leader"), OutcomeUnknown: true}, history.Info},
		{status.Error(codes.DeadlineExceeded, "slow"), history.Info},
		{fmt.Errorf("wrapped: %w", context.Canceled), history.Info},
		{status.Error(codes.Internal, "boom"), history.Info},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestStaleInjector(t *testing.T) {
	s := staleInjector{every: 3}
	var got []uint64
	for v := uint64(10); v < 17; v++ {
		got = append(got, s.apply(v))
	}
	want := []uint64{10, 11, 10, 13, 14, 10, 16}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	off := staleInjector{}
	if off.apply(5) != 5 {
		t.Fatal("disabled injector changed a value")
	}
}
