package fsm

import (
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The targets of a broadcast and the checks that a built-in task's
// callback can succeed are decided from the same state at creation time.
// The task holds its resource keys from before CreateBroadcast until it is
// a TOMBSTONE, so a task accepted here does not become doomed later by a
// broadcast it conflicts with.

// PlanCollectionVChannels returns the VChannels a CreateCollection of
// collectionID with shards shards goes to: the collection's VChannels when
// it has them (a retry), else the placement AllocVirtualChannels would make
// now. Nothing is recorded: the CreateCollection callback records exactly
// the targets its message went to.
func (s *State) PlanCollectionVChannels(collectionID int64, shards uint32) ([]string, *logpb.Rejection) {
	if !s.IsPrimary() {
		return nil, &logpb.Rejection{Code: logpb.RejectCode_REJECT_NOT_PRIMARY,
			Message: "this cluster is a replication secondary; vchannels are allocated on the primary"}
	}
	if existing, ok := s.ch.collections.Get(collectionID); ok {
		if len(existing.Vchannels) != int(shards) {
			return nil, &logpb.Rejection{Code: logpb.RejectCode_REJECT_CONFLICT,
				Message: fmt.Sprintf("collection %d already has %d vchannels, not %d", collectionID, len(existing.Vchannels), shards)}
		}
		return append([]string(nil), existing.Vchannels...), nil
	}
	if s.ch.collections.Len() >= MaxCollections {
		return nil, &logpb.Rejection{Code: logpb.RejectCode_REJECT_EXHAUSTED,
			Message: fmt.Sprintf("%d collections already have vchannels (max %d)", s.ch.collections.Len(), MaxCollections)}
	}
	type cand struct {
		name  string
		count int
	}
	var cands []cand
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		name, _, _ := it.Next()
		if s.AvailableInReplication(name) {
			cands = append(cands, cand{name, s.VChannelCount(name)})
		}
	}
	if len(cands) < int(shards) {
		return nil, &logpb.Rejection{Code: logpb.RejectCode_REJECT_EXHAUSTED,
			Message: fmt.Sprintf("collection %d needs %d distinct pchannels, only %d are available", collectionID, shards, len(cands))}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].count != cands[j].count {
			return cands[i].count < cands[j].count
		}
		return cands[i].name < cands[j].name
	})
	names := make([]string, shards)
	for i := range names {
		names[i] = vocab.VChannelName(cands[i].name, collectionID, i)
	}
	return names, nil
}

// ClusterTargets are the targets of a cluster-level broadcast: the CChannel
// and every other PChannel available in replication (every PChannel when
// all is set, for AlterReplicateConfig, which must reach them all).
func (s *State) ClusterTargets(all bool) []string {
	cch := s.CChannel()
	out := []string{}
	if cch != "" {
		out = append(out, cch)
	}
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		name, _, _ := it.Next()
		if name != vocab.PChannelOf(cch) && (all || s.AvailableInReplication(name)) {
			out = append(out, name)
		}
	}
	return out
}

// CheckBroadcastCreation runs the state guards of CreateBroadcast except
// the idempotency lookup and the capacity limits: the control channel is
// a target, every target's PChannel exists, a built-in type's payload is
// readable and its callback can succeed. nil means it would be accepted.
func (s *State) CheckBroadcastCreation(b *logpb.CreateBroadcast) *logpb.Rejection {
	if r := checkBroadcastTargets(s, b.Vchannels); r != nil {
		return r.Rejection
	}
	if msg := checkBuiltinPayload(b.MessageType, b.Payload); msg != "" {
		return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID, Message: msg}
	}
	return checkBuiltinCreation(s, b)
}

// checkBuiltinCreation refuses a built-in task whose callback could never
// succeed on this state, instead of accepting it to retry for ever while
// it holds its keys.
func checkBuiltinCreation(s *State, b *logpb.CreateBroadcast) *logpb.Rejection {
	switch b.MessageType {
	case vocab.MsgCreateCollection:
		var p logpb.CreateCollectionPayload
		_ = proto.Unmarshal(b.Payload, &p) // checked by checkBuiltinPayload
		return checkCollectionTargets(s, p.CollectionId, p.Shards, b.Vchannels)
	case vocab.MsgAlterReplicateConfig:
		if !holdsExclusiveCluster(b.ResourceKeys) {
			return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID,
				Message: "an AlterReplicateConfig broadcast must hold the exclusive Cluster resource key"}
		}
		var cfg logpb.ReplicateConfiguration
		_ = proto.Unmarshal(b.Payload, &cfg)
		if msg := s.replicateConfigProblem(&cfg); msg != "" {
			return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID, Message: msg}
		}
		if missing := missingPChannels(s, b.Vchannels); len(missing) > 0 {
			return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID,
				Message: fmt.Sprintf("an AlterReplicateConfig broadcast must reach every pchannel; %v are not targets", missing)}
		}
	}
	return nil
}

func holdsExclusiveCluster(keys []*logpb.ResourceKey) bool {
	for _, k := range keys {
		if k.Domain == logpb.ResourceDomain_RK_CLUSTER && !k.Shared {
			return true
		}
	}
	return false
}

// missingPChannels lists the PChannels none of targets is on.
func missingPChannels(s *State, targets []string) []string {
	on := map[string]bool{}
	for _, v := range targets {
		on[vocab.PChannelOf(v)] = true
	}
	var out []string
	for it := s.ch.pchannels.Iterator(); !it.Done(); {
		name, _, _ := it.Next()
		if !on[name] {
			out = append(out, name)
		}
	}
	return out
}

// checkCollectionTargets: the targets of a CreateCollection, minus the
// CChannel, are the collection's VChannels when it has them; otherwise
// they are a placement of its shards on distinct PChannels available in
// replication, shard i named VChannelName(p, collection, i).
func checkCollectionTargets(s *State, collectionID int64, shards uint32, targets []string) *logpb.Rejection {
	vchs := collectionVChannels(s, targets)
	conflict := func(format string, a ...any) *logpb.Rejection {
		return &logpb.Rejection{Code: logpb.RejectCode_REJECT_CONFLICT, Message: fmt.Sprintf(format, a...)}
	}
	if existing, ok := s.ch.collections.Get(collectionID); ok {
		if len(existing.Vchannels) != int(shards) {
			return conflict("collection %d already has %d vchannels, not %d", collectionID, len(existing.Vchannels), shards)
		}
		if !sameSet(existing.Vchannels, vchs) {
			return conflict("collection %d has vchannels %v; a CreateCollection must target exactly those, not %v", collectionID, existing.Vchannels, vchs)
		}
		return nil
	}
	if !s.IsPrimary() {
		return &logpb.Rejection{Code: logpb.RejectCode_REJECT_NOT_PRIMARY,
			Message: "this cluster is a replication secondary; vchannels are allocated on the primary"}
	}
	if s.ch.collections.Len() >= MaxCollections {
		return &logpb.Rejection{Code: logpb.RejectCode_REJECT_EXHAUSTED,
			Message: fmt.Sprintf("%d collections already have vchannels (max %d)", s.ch.collections.Len(), MaxCollections)}
	}
	if len(vchs) != int(shards) {
		return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID,
			Message: fmt.Sprintf("collection %d has %d shards but the broadcast targets %d vchannels", collectionID, shards, len(vchs))}
	}
	shardSeen := make([]bool, shards)
	pSeen := map[string]bool{}
	for _, v := range vchs {
		p := vocab.PChannelOf(v)
		shard := -1
		for i := range shardSeen {
			if v == vocab.VChannelName(p, collectionID, i) {
				shard = i
			}
		}
		switch {
		case shard < 0:
			return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID,
				Message: fmt.Sprintf("target %s is not a vchannel of collection %d with shard 0..%d", v, collectionID, shards-1)}
		case shardSeen[shard]:
			return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID, Message: fmt.Sprintf("shard %d of collection %d is targeted twice", shard, collectionID)}
		case pSeen[p]:
			return &logpb.Rejection{Code: logpb.RejectCode_REJECT_INVALID, Message: fmt.Sprintf("two shards of collection %d on pchannel %s", collectionID, p)}
		case !s.AvailableInReplication(p):
			return conflict("pchannel %s of target %s is not available in replication", p, v)
		}
		shardSeen[shard], pSeen[p] = true, true
	}
	return nil
}

// collectionVChannels is targets without the CChannel.
func collectionVChannels(s *State, targets []string) []string {
	cch := s.CChannel()
	out := make([]string, 0, len(targets))
	for _, v := range targets {
		if v != cch {
			out = append(out, v)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(a))
	for _, x := range a {
		in[x] = true
	}
	for _, x := range b {
		if !in[x] {
			return false
		}
	}
	return true
}
