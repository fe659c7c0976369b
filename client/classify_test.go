package client

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestClassifyTellsUnknownFromNothingDone: what the client makes of the
// server's outcome mark (audit T4-2, the SDK side). An Unavailable marked
// unknown (a committed CreateBroadcast whose answer was lost, now that the
// server keeps the mark) is an unknown outcome: a call that a resend
// would do twice (mutationOnce) is not sent again. One marked none is
// retried as a known outcome, so the server marks none only when nothing
// was submitted. An unmarked one is unknown once the request had left the
// client.
func TestClassifyTellsUnknownFromNothingDone(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "broadcaster: not the leader")
	for _, tc := range []struct {
		name           string
		md             metadata.MD
		sent           bool
		retry, unknown bool
	}{
		{"marked unknown", metadata.Pairs(MDOutcome, OutcomeUnknown), true, true, true},
		{"marked none", metadata.Pairs(MDOutcome, OutcomeNone), true, true, false},
		{"unmarked, sent", nil, true, true, true},
		{"unmarked, never sent", nil, false, true, false},
	} {
		if retry, unknown := classify(unavailable, tc.md, tc.sent); retry != tc.retry || unknown != tc.unknown {
			t.Errorf("%s: classify = retry %v, unknown %v; want %v, %v", tc.name, retry, unknown, tc.retry, tc.unknown)
		}
	}
}
