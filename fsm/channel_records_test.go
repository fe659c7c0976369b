package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// sameChannelRecords reports whether a and b hold equal PChannels,
// streaming nodes and collections, record by record.
func sameChannelRecords(a, b *State) bool {
	return equalRecords(a.PChannels(), b.PChannels()) &&
		equalRecords(a.StreamingNodes(), b.StreamingNodes()) &&
		equalRecords(a.Collections(), b.Collections())
}

func equalRecords[M proto.Message](a, b []M) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// The invariant readers rely on: an entry that keeps the identity keeps
// every channel record, over random logs of every command type.
func TestChannelRecordsIdentityImpliesEqualRecords(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		replayWith(t, New(), genEntries(t, "log", New(), 40), func(t *rapid.T, prev, next *State, _ []commands.Command, _ []*logpb.Result) {
			if prev.ChannelRecords() == next.ChannelRecords() && !sameChannelRecords(prev, next) {
				t.Fatalf("index %d kept the channel records' identity but changed them", next.AppliedIndex())
			}
		})
	})
}

// Commands that change records without a new assignment version move the
// identity; a manifest commit (no channel record) keeps it.
func TestChannelRecordsMovesWhereTheVersionDoesNot(t *testing.T) {
	s := build(t, mfBase(mcommit(createPub(5)), assign(asg(p2, 3, 1)))...)
	for name, c := range map[string]commands.Command{
		"AddPChannels":        addPCh(vocab.PChannelName("dml", 9)),
		"RecordAssignFailure": assignFailed(p2, 2, "boom"),
	} {
		t.Run(name, func(t *testing.T) {
			next, res := mustApply(t, s, c)
			if res[0].Rejection != nil {
				t.Fatalf("rejected: %v", res[0].Rejection)
			}
			if next.AssignmentVersion() != s.AssignmentVersion() {
				t.Fatalf("version moved %v -> %v; the case no longer shows the difference", s.AssignmentVersion(), next.AssignmentVersion())
			}
			if sameChannelRecords(s, next) {
				t.Fatal("the command changed no record; the case shows nothing")
			}
			if next.ChannelRecords() == s.ChannelRecords() {
				t.Fatal("records changed but the identity did not")
			}
		})
	}
	next, res := mustApply(t, s, mcommit(advance(5, 1)))
	checkResult(t, res[0], published(5, 2), "")
	if next.ChannelRecords() != s.ChannelRecords() {
		t.Fatal("a manifest commit moved the channel records' identity")
	}
}
