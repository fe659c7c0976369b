package broadcaster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// TestOperatorActionsNeedAPendingTask: Retry and Abandon refuse an unknown
// task (ErrTaskNotFound) and a finished one (ErrTaskFinished) on the
// manager's own reading of the state: nothing is proposed, and the error
// names the task. (TestCallbackRefusalAndAbandon retries and abandons a
// pending one.)
func TestOperatorActionsNeedAPendingTask(t *testing.T) {
	h := newHarness(t, nil)
	finished := h.leader.MustPropose(t, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{h.cch}}).GetBroadcast().GetBroadcastId()
	h.leader.MustPropose(t, &logpb.AbandonBroadcast{BroadcastId: finished, Reason: "set up"})
	h.run(h.m, testTerm)
	abandons := func() int { return len(appliedOf[*logpb.AbandonBroadcast](h.leader)) }
	before := abandons()

	for _, tc := range []struct {
		name string
		id   uint64
		want error
		text string
	}{
		{"unknown", 999_999, ErrTaskNotFound, "broadcast 999999 is unknown"},
		{"finished", finished, ErrTaskFinished, "is already finished"},
	} {
		if err := h.m.Retry(tc.id); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Retry(%s) = %v, want %v mentioning %q", tc.name, err, tc.want, tc.text)
		}
		if err := h.m.Abandon(context.Background(), tc.id, "r"); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Abandon(%s) = %v, want %v mentioning %q", tc.name, err, tc.want, tc.text)
		}
	}
	if got := abandons(); got != before {
		t.Fatalf("refused abandons proposed %d commands", got-before)
	}
}
