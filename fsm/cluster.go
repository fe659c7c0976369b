package fsm

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// applyLeaderEstablished records the term of a leader that has passed its
// first Barrier. A repeat for the same term is a no-op; an older term is stale.
func applyLeaderEstablished(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.LeaderEstablished)
	switch {
	case b.Term < next.leader.term:
		return reject(logpb.RejectCode_REJECT_STALE, "leader term %d is older than established term %d", b.Term, next.leader.term)
	case b.Term == next.leader.term:
		return &logpb.Result{Value: &logpb.Result_Number{Number: b.Term}}
	}
	next.leader = leadershipState{term: b.Term, leaderID: b.LeaderId, establishedMs: c.ProposedAtUnixMs}
	// A new Global version starts; Local counts changes since
	// (docs/semantics.md#assignment-stream).
	next.setMeta(func(m *logpb.ChannelsMeta) { m.VersionLocal = 0 })
	return &logpb.Result{Value: &logpb.Result_Number{Number: b.Term}}
}

// applyUpsertMember records (or replaces) a member's addresses.
func applyUpsertMember(next *State, c commands.Command) *logpb.Result {
	m := proto.Clone(c.Body.(*logpb.UpsertMember).Member).(*logpb.Member)
	next.cluster.members = next.cluster.members.Set(m.Id, m)
	return accepted()
}

// applyRemoveMember forgets a member's addresses; removing an unknown member
// is a no-op so that a retried removal succeeds.
func applyRemoveMember(next *State, c commands.Command) *logpb.Result {
	id := c.Body.(*logpb.RemoveMember).Id
	next.cluster.members = next.cluster.members.Delete(id)
	return accepted()
}
