package fsm

import (
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// applyAllocVirtualChannels places a collection's shards on distinct,
// least-loaded PChannels that are available in replication
// (docs/semantics.md#vchannels): candidates sorted by VChannel count, then
// name; shard i goes to the i-th. Committed, so the placement and the
// per-PChannel counts survive failover. A repeat for the same collection and
// count returns the first placement.
func applyAllocVirtualChannels(next *State, c commands.Command) *logpb.Result {
	b := c.Body.(*logpb.AllocVirtualChannels)
	return allocVirtualChannels(next, b.CollectionId, b.Count)
}

// allocVirtualChannels places the collection's shards as
// PlanCollectionVChannels says and records them; a repeat for the same
// collection and count returns the first placement.
func allocVirtualChannels(next *State, collectionID int64, count uint32) *logpb.Result {
	names, r := next.PlanCollectionVChannels(collectionID, count)
	if r != nil {
		return &logpb.Result{Rejection: r}
	}
	if _, ok := next.ch.collections.Get(collectionID); !ok {
		recordCollection(next, collectionID, names)
	}
	return &logpb.Result{Value: &logpb.Result_Vchannels{Vchannels: &logpb.VChannelList{Vchannels: names}}}
}

// recordCollection records a new collection on names and counts them
// against their PChannels.
func recordCollection(next *State, collectionID int64, names []string) {
	for _, v := range names {
		p := vocab.PChannelOf(v)
		next.ch.vcount = next.ch.vcount.Set(p, next.VChannelCount(p)+1)
	}
	next.ch.collections = next.ch.collections.Set(collectionID, &logpb.CollectionVChannels{CollectionId: collectionID, Vchannels: names})
	next.bumpVersion()
}

// applyDropVirtualChannels forgets a collection's VChannels.
func applyDropVirtualChannels(next *State, c commands.Command) *logpb.Result {
	id := c.Body.(*logpb.DropVirtualChannels).CollectionId
	if _, ok := next.ch.collections.Get(id); !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "collection %d has no vchannels", id)
	}
	return dropVirtualChannels(next, id, c.ProposedAtUnixMs)
}

// dropVirtualChannels forgets a collection's VChannels if it has any
// (shared with the DropCollection broadcast callback, which is idempotent);
// nowMs is the leader-stamped time of the command that drops them.
func dropVirtualChannels(next *State, id int64, nowMs int64) *logpb.Result {
	coll, ok := next.ch.collections.Get(id)
	if !ok {
		return accepted()
	}
	for _, v := range coll.Vchannels {
		p := vocab.PChannelOf(v)
		n := next.VChannelCount(p) - 1
		if n <= 0 {
			next.ch.vcount = next.ch.vcount.Delete(p)
		} else {
			next.ch.vcount = next.ch.vcount.Set(p, n)
		}
	}
	dropCollectionSegments(next, coll, nowMs)
	next.ch.collections = next.ch.collections.Delete(id)
	next.bumpVersion()
	return accepted()
}
