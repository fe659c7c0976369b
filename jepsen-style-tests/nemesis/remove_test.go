package nemesis

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/client"
)

func TestMayBeRemoved(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"removed", nil, true},
		{"outcome unknown", &client.Error{Op: "RemoveMember(n3)", OutcomeUnknown: true, Err: status.Error(codes.Unavailable, "lost")}, true},
		{"gone on a retry (storage-3-snap-r01 seed 296971638)", &client.Error{Op: "RemoveMember(n3)", Attempts: 16,
			Err: status.Error(codes.NotFound, `unknown member: member "n3" is not in the cluster`)}, true},
		{"no leader, nothing applied", &client.Error{Op: "RemoveMember(n3)", Err: status.Error(codes.Unavailable, "no leader is known")}, false},
		{"refused", &client.Error{Op: "RemoveMember(n3)", Err: status.Error(codes.FailedPrecondition, "last voter")}, false},
		{"not a client error", errors.New("dial refused"), false},
	}
	for _, c := range cases {
		if got := mayBeRemoved(c.err); got != c.want {
			t.Errorf("%s: mayBeRemoved = %v, want %v", c.name, got, c.want)
		}
	}
}
