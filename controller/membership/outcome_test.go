package membership

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
)

// lostAnswerRaft applies a removal, then answers it as raft does when the
// leader lost its leadership with the entry in flight: an unknown outcome.
type lostAnswerRaft struct{ *fakeRaft }

func (r lostAnswerRaft) RemoveServer(id string) error {
	_ = r.fakeRaft.RemoveServer(id)
	return fmt.Errorf("remove %s: %w (leadership lost)", id, leadership.ErrOutcomeUnknown)
}

// TestRemoveMemberRetryAfterUnknownOutcomeFinishesTheRemoval (audit T4-3,
// the service's side): a removal whose raft change committed but was
// answered with an unknown outcome keeps that answer (the caller must not
// read it as "nothing done") and leaves the directory record. The caller's
// retry then finds the member gone from raft: it forgets the addresses and
// succeeds, instead of answering "unknown member" for a removal that
// happened. A member neither raft nor the directory knows stays
// ErrUnknownMember.
func TestRemoveMemberRetryAfterUnknownOutcomeFinishesTheRemoval(t *testing.T) {
	_, r, l := newTestService(t)
	s := New(lostAnswerRaft{r}, l, "n1")
	s.poll = time.Millisecond
	l.MustPropose(t, &logpb.UpsertMember{Member: &logpb.Member{Id: "n3", RaftAddr: "127.0.0.1:7003"}})
	rm, err := NewRemoval(&coordpb.RemoveMemberRequest{Id: "n3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMember(l.Deadline(), rm); !errors.Is(err, leadership.ErrOutcomeUnknown) {
		t.Fatalf("first attempt: %v, want the unknown outcome raft answered", err)
	}
	if _, ok := directory(l, "n3"); !ok {
		t.Fatal("the directory forgot n3 although the first attempt did not get that far")
	}
	if err := s.RemoveMember(l.Deadline(), rm); err != nil {
		t.Fatalf("the retry of a removal that committed: %v, want success", err)
	}
	if _, ok := directory(l, "n3"); ok || strings.Join(r.log(), ",") != "remove n3" {
		t.Fatalf("after the retry: n3 in the directory %v, raft changes %v; want it forgotten and removed once", ok, r.log())
	}
	ghost, _ := NewRemoval(&coordpb.RemoveMemberRequest{Id: "ghost"})
	if err := s.RemoveMember(l.Deadline(), ghost); !errors.Is(err, ErrUnknownMember) {
		t.Fatalf("a member nobody knows: %v, want ErrUnknownMember", err)
	}
}
