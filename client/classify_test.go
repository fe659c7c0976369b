package client

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestClassifyTellsUnknownFromNothingDone: what the client makes of the
// server's outcome mark (audit T4-2, the SDK side). An Unavailable marked
// unknown (a committed CreateBroadcast whose answer was lost, once the
// server keeps the mark) is retried as an unknown outcome, which a
// broadcast without an idempotency key is never resent after (kind
// longMutationOnce); one marked none is retried as a known outcome, so the
// server must mark none only when nothing was submitted; an unmarked one
// is unknown once the request had left the client.
func TestClassifyTellsUnknownFromNothingDone(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "broadcaster: not the leader")
	for _, tc := range []struct {
		name                string
		md                  metadata.MD
		sent                bool
		retry, unknown      bool
		resentByBroadcastNo bool // would a broadcast without an idempotency key be sent again
	}{
		{"marked unknown", metadata.Pairs(MDOutcome, OutcomeUnknown), true, true, true, false},
		{"marked none", metadata.Pairs(MDOutcome, OutcomeNone), true, true, false, true},
		{"unmarked, sent", nil, true, true, true, false},
		{"unmarked, never sent", nil, false, true, false, true},
	} {
		retry, unknown := classify(unavailable, tc.md, tc.sent)
		if retry != tc.retry || unknown != tc.unknown {
			t.Errorf("%s: classify = retry %v, unknown %v; want %v, %v", tc.name, retry, unknown, tc.retry, tc.unknown)
		}
		if resent := retry && !(unknown && longMutationOnce.once()); resent != tc.resentByBroadcastNo {
			t.Errorf("%s: a broadcast without an idempotency key would be resent: %v, want %v", tc.name, resent, tc.resentByBroadcastNo)
		}
	}
}
