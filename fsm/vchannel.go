package fsm

import (
	"sort"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
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

// allocVirtualChannels is the allocation itself, shared with the
// CreateCollection broadcast callback.
func allocVirtualChannels(next *State, collectionID int64, count uint32) *logpb.Result {
	b := &logpb.AllocVirtualChannels{CollectionId: collectionID, Count: count}
	if !next.IsPrimary() {
		return reject(logpb.RejectCode_REJECT_NOT_PRIMARY, "this cluster is a replication secondary; vchannels are allocated on the primary")
	}
	if existing, ok := next.ch.collections.Get(b.CollectionId); ok {
		if len(existing.Vchannels) == int(b.Count) {
			return &logpb.Result{Value: &logpb.Result_Vchannels{Vchannels: &logpb.VChannelList{Vchannels: existing.Vchannels}}}
		}
		return reject(logpb.RejectCode_REJECT_CONFLICT, "collection %d already has %d vchannels, not %d",
			b.CollectionId, len(existing.Vchannels), b.Count)
	}
	if next.ch.collections.Len() >= MaxCollections {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "%d collections already have vchannels (max %d)", next.ch.collections.Len(), MaxCollections)
	}
	type cand struct {
		name  string
		count int
	}
	var cands []cand
	for it := next.ch.pchannels.Iterator(); !it.Done(); {
		name, _, _ := it.Next()
		if next.AvailableInReplication(name) {
			cands = append(cands, cand{name, next.VChannelCount(name)})
		}
	}
	if len(cands) < int(b.Count) {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "collection %d needs %d distinct pchannels, only %d are available",
			b.CollectionId, b.Count, len(cands))
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].count != cands[j].count {
			return cands[i].count < cands[j].count
		}
		return cands[i].name < cands[j].name
	})
	names := make([]string, b.Count)
	for i := range names {
		names[i] = commands.VChannelName(cands[i].name, b.CollectionId, i)
		next.ch.vcount = next.ch.vcount.Set(cands[i].name, cands[i].count+1)
	}
	next.ch.collections = next.ch.collections.Set(b.CollectionId, &logpb.CollectionVChannels{CollectionId: b.CollectionId, Vchannels: names})
	next.bumpVersion()
	return &logpb.Result{Value: &logpb.Result_Vchannels{Vchannels: &logpb.VChannelList{Vchannels: names}}}
}

// applyDropVirtualChannels forgets a collection's VChannels.
func applyDropVirtualChannels(next *State, c commands.Command) *logpb.Result {
	id := c.Body.(*logpb.DropVirtualChannels).CollectionId
	if _, ok := next.ch.collections.Get(id); !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "collection %d has no vchannels", id)
	}
	return dropVirtualChannels(next, id)
}

// dropVirtualChannels forgets a collection's VChannels if it has any
// (shared with the DropCollection broadcast callback, which is idempotent).
func dropVirtualChannels(next *State, id int64) *logpb.Result {
	coll, ok := next.ch.collections.Get(id)
	if !ok {
		return accepted()
	}
	for _, v := range coll.Vchannels {
		p := commands.PChannelOf(v)
		n := next.VChannelCount(p) - 1
		if n <= 0 {
			next.ch.vcount = next.ch.vcount.Delete(p)
		} else {
			next.ch.vcount = next.ch.vcount.Set(p, n)
		}
	}
	next.ch.collections = next.ch.collections.Delete(id)
	next.bumpVersion()
	return accepted()
}
