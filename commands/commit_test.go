package commands

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// answeringProposer answers every proposal with res and err.
type answeringProposer struct {
	res   *logpb.Result
	err   error
	calls int
}

func (p *answeringProposer) Propose(context.Context, Command, ...Option) (*logpb.Result, error) {
	p.calls++
	return p.res, p.err
}

func mustNew(t *testing.T) Command {
	t.Helper()
	c, err := New(&logpb.ReserveIDs{Count: 2}, "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCommitFoldsTheRejection: Apply's refusal comes back as one
// *RejectedError with its code and message and no result; the proposer's
// own error comes back as it is; an accepted command returns its result.
func TestCommitFoldsTheRejection(t *testing.T) {
	ctx := context.Background()

	refused := &answeringProposer{res: &logpb.Result{Rejection: &logpb.Rejection{
		Code: logpb.RejectCode_REJECT_STALE, Message: "window 5 is behind 7"}}}
	res, err := Commit(ctx, refused, mustNew(t))
	var rej *RejectedError
	if res != nil || !errors.As(err, &rej) || rej.Code != logpb.RejectCode_REJECT_STALE || rej.Message != "window 5 is behind 7" {
		t.Fatalf("Commit(refused) = %v, %v; want no result and a REJECT_STALE RejectedError with Apply's message", res, err)
	}
	if err.Error() != "window 5 is behind 7" {
		t.Fatalf("a refusal's message is %q, want Apply's", err.Error())
	}

	lost := errors.New("leadership lost")
	failing := &answeringProposer{err: fmt.Errorf("propose: %w", lost)}
	if res, err := Commit(ctx, failing, mustNew(t)); res != nil || !errors.Is(err, lost) || errors.As(err, &rej) {
		t.Fatalf("Commit(failing) = %v, %v; want the proposer's error, not a RejectedError", res, err)
	}

	want := &logpb.Result{Value: &logpb.Result_IdRange{IdRange: &logpb.IDRange{First: 10, Count: 2}}}
	accepted := &answeringProposer{res: want}
	if res, err := Commit(ctx, accepted, mustNew(t)); err != nil || res != want {
		t.Fatalf("Commit(accepted) = %v, %v; want the proposer's result", res, err)
	}

	if _, err := CommitNew(ctx, accepted, &logpb.ReserveIDs{Count: 0}, ""); !errors.Is(err, ErrInvalid) || accepted.calls != 1 {
		t.Fatalf("CommitNew(invalid body) = %v after %d proposals; want ErrInvalid before proposing", err, accepted.calls)
	}
	if _, err := CommitNew(ctx, refused, &logpb.ReserveIDs{Count: 2}, "r"); !errors.As(err, &rej) {
		t.Fatalf("CommitNew(refused) = %v, want a RejectedError", err)
	}
}

// TestRejectedErrorClasses: errors.Is matches ErrInvalid for an invalid
// refusal, and a class sentinel of the same code, through wrapping.
func TestRejectedErrorClasses(t *testing.T) {
	notPrimary := &RejectedError{Code: logpb.RejectCode_REJECT_NOT_PRIMARY, Message: "cluster is not primary"}
	tests := []struct {
		err    error
		target error
		want   bool
	}{
		{Rejected(&logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID, Message: "x"}), ErrInvalid, true},
		{Rejected(&logpb.Rejection{Code: logpb.RejectCode_REJECT_CONFLICT, Message: "x"}), ErrInvalid, false},
		{fmt.Errorf("create: %w", Rejected(&logpb.Rejection{Code: logpb.RejectCode_REJECT_NOT_PRIMARY, Message: "secondary"})), notPrimary, true},
		{Rejected(&logpb.Rejection{Code: logpb.RejectCode_REJECT_CONFLICT, Message: "x"}), notPrimary, false},
		{fmt.Errorf("%w: segment 5", notPrimary), notPrimary, true},
	}
	for _, tc := range tests {
		if got := errors.Is(tc.err, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.err, tc.target, got, tc.want)
		}
	}
	if Rejected(nil) != nil {
		t.Error("Rejected(nil) is not nil")
	}
}
