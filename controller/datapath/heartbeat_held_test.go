package datapath

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
)

// heldOf checks a heartbeat's list of held WALs: bad input is an
// InvalidArgument-class error and an unreported list is nil (not judged).
func TestHeartbeatHeldIsValidated(t *testing.T) {
	held := func(hs ...*coordpb.HeldPChannel) *coordpb.HeartbeatRequest {
		return &coordpb.HeartbeatRequest{NodeId: 1, Epoch: 1, Held: hs, HeldReported: true}
	}
	h := func(p string, term int64) *coordpb.HeldPChannel {
		return &coordpb.HeldPChannel{Pchannel: p, Term: term}
	}
	tests := []struct {
		name    string
		req     *coordpb.HeartbeatRequest
		want    map[string]int64
		wantErr string
	}{
		{"not reported", &coordpb.HeartbeatRequest{NodeId: 1, Epoch: 1}, nil, ""},
		{"reported empty", held(), map[string]int64{}, ""},
		{"two", held(h("dml_0", 2), h("dml_1", 5)), map[string]int64{"dml_0": 2, "dml_1": 5}, ""},
		{"list without the flag", &coordpb.HeartbeatRequest{Held: []*coordpb.HeldPChannel{h("dml_0", 2)}}, nil, "held_reported is not set"},
		{"zero term", held(h("dml_0", 0)), nil, "want a positive term"},
		{"bad name", held(h("../x", 2)), nil, "held:"},
		{"duplicate", held(h("dml_0", 2), h("dml_0", 3)), nil, "listed twice"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := heldOf(tc.req)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want invalid containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for p, term := range tc.want {
				if got[p] != term {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}
