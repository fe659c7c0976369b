package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// after is a CreateBroadcast pipelined behind the completions of ids.
func after(ids ...uint64) bcEdit {
	return func(b *logpb.CreateBroadcast) { b.AfterBroadcasts = ids }
}

// TestCreateBroadcastAfterPredecessors: a create ordered behind
// conflicting tasks is decided only once each is a tombstone (or pruned);
// before that it is refused with REJECT_ORDER, changes nothing and leaves
// no record of its request ID.
func TestCreateBroadcastAfterPredecessors(t *testing.T) {
	first := createB("CreateIndex")
	second := createB("CreateIndex")
	done1, done2 := completeWith(1, cpt(cch, 1, 1, 1)), completeWith(2, cpt(cch, 1, 2, 2))
	runApplyCases(t, []applyCase{
		{
			name:    "predecessor pending",
			setup:   base(first),
			cmd:     cmd(bcBody("CreateIndex", after(1)), withRequestID("r1")),
			want:    rejected(logpb.RejectCode_REJECT_ORDER),
			wantMsg: "broadcast 1, which holds a conflicting resource key, is not finished yet",
		},
		{
			name:  "predecessor tombstoned",
			setup: base(first, done1),
			cmd:   cmd(bcBody("CreateIndex", after(1)), withRequestID("r1")),
			want:  createdResult(2, false),
			check: all(wantState(2, logpb.BroadcastState_BROADCAST_PENDING), wantNextID(3)),
		},
		{
			name:  "predecessor pruned",
			setup: base(first, done1, pruneB(0, 1)),
			cmd:   createB("CreateIndex", after(1)),
			want:  createdResult(2, false),
			check: all(wantNoTask(1), wantState(2, logpb.BroadcastState_BROADCAST_PENDING)),
		},
		{
			name:    "one of two predecessors pending",
			setup:   base(first, second, done1),
			cmd:     createB("CreateIndex", after(1, 2)),
			want:    rejected(logpb.RejectCode_REJECT_ORDER),
			wantMsg: "broadcast 2,",
		},
		{
			name:  "both predecessors tombstoned",
			setup: base(first, second, done2, done1),
			cmd:   createB("CreateIndex", after(1, 2)),
			want:  createdResult(3, false),
		},
		{
			name:    "a predecessor never created",
			setup:   base(first),
			cmd:     createB("CreateIndex", after(1, 9)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "predecessor broadcast 9 was never created",
		},
		{
			// Nothing about the create is decided before its predecessors
			// have finished: not even the guards that would refuse it.
			name:    "the order guard runs before the others",
			setup:   base(first),
			cmd:     createB("CreateIndex", after(1), withTargets(v15)), // no cchannel
			want:    rejected(logpb.RejectCode_REJECT_ORDER),
			wantMsg: "not finished yet",
		},
		{
			name:    "an idempotency key waits too",
			setup:   base(createB("CreateIndex", withIK("cluster/0/1:k"))),
			cmd:     createB("CreateIndex", withIK("cluster/0/1:k"), after(1)),
			want:    rejected(logpb.RejectCode_REJECT_ORDER),
			wantMsg: "not finished yet",
		},
	})
}

// TestRefusedForOrderThenProposedAgain: the leader proposes the very same
// request again (same request ID, same body) once the predecessor is
// done. The refusal must not have been recorded against the request ID,
// and once applied, a further repeat returns the first success.
func TestRefusedForOrderThenProposedAgain(t *testing.T) {
	s := New()
	for _, c := range base(createB("CreateIndex")) {
		s, _ = mustApply(t, s, c)
	}
	pipelined := cmd(bcBody("CreateIndex", after(1)), withRequestID("create-2"))
	s, res := mustApply(t, s, pipelined)
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_ORDER), "not finished yet")
	s, _ = mustApply(t, s, completeWith(1, cpt(cch, 1, 1, 1)))
	s, res = mustApply(t, s, pipelined)
	checkResult(t, res[0], createdResult(2, false), "")
	// A retry through another leader that did not pipeline it: the same
	// request (after_broadcasts is not part of its fingerprint).
	plain := cmd(bcBody("CreateIndex"), withRequestID("create-2"))
	for _, c := range []commands.Command{pipelined, plain} {
		var again []*logpb.Result
		s, again = mustApply(t, s, c)
		checkResult(t, again[0], createdResult(2, false), "")
	}
	if n := len(s.BroadcastTasks()); n != 2 {
		t.Fatalf("%d tasks, want 2", n)
	}
}
