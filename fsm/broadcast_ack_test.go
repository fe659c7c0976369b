package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// ackFrom is an ack sent by streaming node (node, epoch).
func ackFrom(id, node, epoch uint64, cps ...*logpb.VChannelCheckpoint) commands.Command {
	return cmd(&logpb.AckBroadcast{BroadcastId: id, Checkpoints: cps, FromNode: node, FromEpoch: epoch})
}

// atVersion makes c a command of an older body version, as a log written
// by an older leader holds it.
func atVersion(c commands.Command, v uint32) commands.Command {
	c.Version = v
	return c
}

// TestExternalAckIsOwnerChecked: an ack from a streaming node is recorded
// only for an ack_sync_up task, from a live session, for channels that node
// owns now, at a term no newer than the channel's (v2 acks: exactly the
// channel's term); otherwise nothing changes.
func TestExternalAckIsOwnerChecked(t *testing.T) {
	// Nodes 1..3 registered at epochs 2..4; p0 (the control channel's) and
	// p1 on node 1, p2 on node 2, each at term 2.
	owned := concat(base(), assigned(p0, 1), assigned(p1, 1), assigned(p2, 2))
	syncUp := func(more ...commands.Command) []commands.Command {
		return append(append(append([]commands.Command{}, owned...),
			createB("CreateIndex", withTargets(v25, cch, v15), func(b *logpb.CreateBroadcast) { b.AckSyncUp = true })), more...)
	}
	plain := append(append([]commands.Command{}, owned...), createB("CreateIndex", withTargets(v25, cch, v15)))
	good := cpt(v15, 2, 7, 70)
	runApplyCases(t, []applyCase{
		{
			name:  "the owner acks at the current term",
			setup: syncUp(),
			cmd:   ackFrom(1, 1, 2, good, cpt(cch, 2, 8, 80)),
			want:  numberResult(2),
		},
		{
			name:  "checkpoints for non-targets are ignored",
			setup: syncUp(),
			cmd:   ackFrom(1, 1, 2, good, cpt(v16, 9, 9, 9)),
			want:  numberResult(1),
		},
		{
			name:    "a task that is not ack_sync_up",
			setup:   plain,
			cmd:     ackFrom(1, 1, 2, good),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "not ack_sync_up",
		},
		{
			name:    "another node's channel",
			setup:   syncUp(),
			cmd:     ackFrom(1, 2, 3, good),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "owned by streaming node 1, not 2",
		},
		{
			// The current owner found the record a previous owner persisted
			// at term 1 when it deduplicated a re-append: a true ack.
			name:  "the owner acks a record of an older term",
			setup: syncUp(),
			cmd:   ackFrom(1, 1, 2, cpt(v15, 1, 7, 70)),
			want:  numberResult(1),
		},
		{
			name:    "an older term in a version 2 ack (replayed from an older leader's log)",
			setup:   syncUp(),
			cmd:     atVersion(ackFrom(1, 1, 2, cpt(v15, 1, 7, 70)), 2),
			want:    rejected(logpb.RejectCode_REJECT_STALE),
			wantMsg: "pchannel " + p1 + " is at term 2",
		},
		{
			name:    "an older term from a node that no longer owns the channel",
			setup:   syncUp(),
			cmd:     ackFrom(1, 2, 3, cpt(v15, 1, 7, 70)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "owned by streaming node 1, not 2",
		},
		{
			name:    "a newer term than the channel's",
			setup:   syncUp(),
			cmd:     ackFrom(1, 1, 2, cpt(v15, 1<<40, 7, 70)),
			want:    rejected(logpb.RejectCode_REJECT_STALE),
			wantMsg: "is at term 2",
		},
		{
			name:    "one bad checkpoint refuses the whole ack",
			setup:   syncUp(),
			cmd:     ackFrom(1, 1, 2, good, cpt(v25, 2, 1, 1)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "owned by streaming node 2",
		},
		{
			name:    "an old session of the owner",
			setup:   syncUp(),
			cmd:     ackFrom(1, 1, 99, good),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "no live session",
		},
		{
			name:    "an unknown node",
			setup:   syncUp(),
			cmd:     ackFrom(1, 42, 2, good),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "no live session",
		},
		{
			name:    "a node that is down",
			setup:   syncUp(markDown(1, 2, "ttl")),
			cmd:     ackFrom(1, 1, 2, good),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "no live session",
		},
		{
			name:      "an unknown task stays a no-op",
			setup:     syncUp(),
			cmd:       ackFrom(9, 1, 2, good),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "coordd's own ack of a plain task is still recorded",
			setup: plain,
			cmd:   ackB(1, cpt(v15, 1, 7, 70)),
			want:  numberResult(1),
		},
	})
}
