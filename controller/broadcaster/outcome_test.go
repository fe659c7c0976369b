package broadcaster

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
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
	go func() { defer close(done); h.m.Run(ctx, testTerm, h.leader) }()
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

// TestRetryWithTheSameRequestIDFindsTheFirstTask: the client's resend of a
// call whose CreateBroadcast committed while the leadership moved (audit
// T4-2's consequence) carries the first call's request ID. The new leader
// answers it with the first task, duplicated, whether the call named its
// targets or the manager chose them: one task, one message in each WAL.
func TestRetryWithTheSameRequestIDFindsTheFirstTask(t *testing.T) {
	for _, tc := range []struct {
		name    string
		targets func(h *harness) []string
	}{
		{"named targets", func(h *harness) []string { return []string{h.vch(1, 100)} }},
		{"targets chosen by the manager", func(*harness) []string { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			stop1 := h.run(h.m, testTerm)
			var once atomic.Bool
			h.leader.SetAfterApply(func(body proto.Message) error {
				if _, ok := body.(*logpb.CreateBroadcast); ok && once.CompareAndSwap(false, true) {
					h.leader.SetEstablished(0)
					return errCommittedButLost
				}
				return nil
			})
			h.leader.SetBeforePropose(func(body proto.Message) error {
				if _, ok := body.(*logpb.CreateBroadcast); ok && once.Load() && h.leader.EstablishedTerm() == 0 {
					return controllertest.ErrNotLeader
				}
				return nil
			})
			req := Request{MessageType: "CreateIndex", Payload: []byte("idx-1"), RequestID: "client-call-1",
				ResourceKeys: []*logpb.ResourceKey{collKey("db", "c", false)}, VChannels: tc.targets(h)}
			r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, req))
			if !errors.Is(r.err, leadership.ErrOutcomeUnknown) {
				t.Fatalf("first call: %v; want an unknown outcome", r.err)
			}
			stop1()
			h.leader.SetAfterApply(nil)
			h.leader.SetBeforePropose(nil)
			h.leader.Establish(t, testTerm+1)
			m2 := h.newManager()
			h.run(m2, testTerm+1)
			r2 := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), m2, req))
			tasks := h.leader.State().BroadcastTasks()
			if r2.err != nil || !r2.res.Duplicated || len(tasks) != 1 || tasks[0].Id != r2.res.BroadcastID {
				t.Fatalf("the resend: %+v %v with %d tasks; want the first task, duplicated, and no other", r2.res, r2.err, len(tasks))
			}
			for _, v := range tasks[0].Vchannels {
				if ids := h.app.walIDs(v); len(ids) != 1 {
					t.Fatalf("the WAL of %s holds broadcasts %v; want the one", v, ids)
				}
			}
		})
	}
}

// TestRequestIDReusedForAnotherBroadcastIsRefused: a request ID names one
// call; a broadcast of another type or other keys under it is refused by
// Apply (REJECT_INVALID) and creates nothing. (Once the first task is a
// tombstone its payload is gone, so a reuse that differs only in the
// payload is answered with the first task.)
func TestRequestIDReusedForAnotherBroadcastIsRefused(t *testing.T) {
	h := newHarness(t, nil)
	h.run(h.m, testTerm)
	req := Request{MessageType: "CreateIndex", Payload: []byte("idx-1"), RequestID: "client-call-1",
		ResourceKeys: []*logpb.ResourceKey{collKey("db", "c", false)}, VChannels: []string{h.vch(1, 100)}}
	if r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, req)); r.err != nil {
		t.Fatal(r.err)
	}
	req.MessageType = "DropIndex"
	var rej *commands.RejectedError
	if r := h.wait(broadcastAsync(ctxTimeout(t, 5*time.Second), h.m, req)); !errors.As(r.err, &rej) || rej.Code != logpb.RejectCode_REJECT_INVALID {
		t.Fatalf("another broadcast under the same request ID: %+v %v; want REJECT_INVALID", r.res, r.err)
	}
	if n := len(h.leader.State().BroadcastTasks()); n != 1 {
		t.Fatalf("%d tasks, want 1", n)
	}
}
