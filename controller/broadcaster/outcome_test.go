package broadcaster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/leadership"
)

// errCommittedButLost is the fake leader's answer for a CreateBroadcast it
// applied: raft's "leadership lost while the entry was in flight", which
// the raft node reports as an unknown outcome.
var errCommittedButLost = fmt.Errorf("%w: leadership lost while committing", leadership.ErrOutcomeUnknown)

// TestCreateUnknownOutcomeSurvivesTheRetrysNotLeader (audit T4-2, path a):
// the CreateBroadcast commits but its answer is lost; proposeRetrying
// proposes it again with the same request ID and that attempt finds the
// node no longer leading (nothing done by the retry). Broadcast must still
// answer an unknown outcome, never "not the leader", which the API turns
// into coordd-outcome: none and a client into a second broadcast. The
// test then plays that client: the retry on the new leader (a new request
// ID, as a call without an idempotency key gets) makes a second task.
func TestCreateUnknownOutcomeSurvivesTheRetrysNotLeader(t *testing.T) {
	h := newHarness(t, nil)
	stop1 := h.run(h.m, testTerm)
	var creates atomic.Int32
	h.leader.SetAfterApply(func(body proto.Message) error {
		if _, ok := body.(*logpb.CreateBroadcast); ok && creates.Add(1) == 1 {
			return errCommittedButLost
		}
		return nil
	})
	var refused atomic.Bool
	h.leader.SetBeforePropose(func(body proto.Message) error {
		if _, ok := body.(*logpb.CreateBroadcast); ok && creates.Load() >= 1 && refused.CompareAndSwap(false, true) {
			return controllertest.ErrNotLeader // the retry: this node no longer leads
		}
		return nil
	})
	req := Request{MessageType: "CreateIndex", Payload: []byte("idx-1"),
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c", false)}, VChannels: []string{h.vch(1, 100)}}
	r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, req))
	if !refused.Load() {
		t.Fatalf("the retry never ran: Broadcast returned %v", r.err)
	}
	if n := len(h.leader.State().BroadcastTasks()); n != 1 {
		t.Fatalf("%d tasks in the FSM, want the one committed", n)
	}
	if !errors.Is(r.err, leadership.ErrOutcomeUnknown) {
		t.Fatalf("Broadcast answered %v for a CreateBroadcast that committed; want an unknown outcome", r.err)
	}
	if errors.Is(r.err, leadership.ErrNotLeader) {
		t.Fatalf("Broadcast answered %v: it also says \"not the leader\" (nothing done)", r.err)
	}
	stop1()
}

// TestCreateUnknownOutcomeAtLeadershipEndStaysUnknown (audit T4-2, path
// b): the CreateBroadcast's answer is lost because the leadership ended
// while it committed. create reports the end of the leadership, and the
// unknown outcome must stay in the error's chain.
func TestCreateUnknownOutcomeAtLeadershipEndStaysUnknown(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); h.m.Run(ctx, testTerm) }()
	h.eventually("leadership published", func() bool { return h.m.current() != nil })
	var once atomic.Bool
	h.leader.SetAfterApply(func(body proto.Message) error {
		if _, ok := body.(*logpb.CreateBroadcast); ok && once.CompareAndSwap(false, true) {
			cancel() // the leadership ends while the entry commits
			return errCommittedButLost
		}
		return nil
	})
	r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, Request{MessageType: "CreateIndex", Payload: []byte("idx-1"),
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c", false)}, VChannels: []string{h.vch(1, 100)}}))
	<-done
	if n := len(h.leader.State().BroadcastTasks()); n != 1 {
		t.Fatalf("%d tasks in the FSM, want the one committed", n)
	}
	if !errors.Is(r.err, leadership.ErrOutcomeUnknown) {
		t.Fatalf("Broadcast answered %v for a CreateBroadcast that committed; want an unknown outcome", r.err)
	}
}

// TestCreateCallerGivingUpIsAnUnknownOutcome: a caller whose context ends
// while its task's CreateBroadcast is in flight is told the outcome is
// unknown (the proposal goes on and may commit), not only that its
// deadline passed.
func TestCreateCallerGivingUpIsAnUnknownOutcome(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	h.leader.SetAfterQueued(func(body proto.Message) {
		if _, ok := body.(*logpb.CreateBroadcast); ok {
			cancel() // the caller gives up with the entry queued
			<-release
		}
	})
	r := h.wait(broadcastAsync(ctx, h.m, Request{MessageType: "CreateIndex", Payload: []byte("idx-1"),
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c", false)}, VChannels: []string{h.vch(1, 100)}}))
	close(release)
	if !errors.Is(r.err, leadership.ErrOutcomeUnknown) || !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Broadcast answered %v; want an unknown outcome that says the caller gave up", r.err)
	}
	h.eventually("the task commits and finishes anyway", func() bool {
		return len(h.leader.State().BroadcastTasks()) == 1 && len(h.leader.State().PendingBroadcasts()) == 0
	})
}
