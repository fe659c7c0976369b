package fsm

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Pools for broadcast commands: few message types and scoped keys, so
// idempotency scopes collide often; a few values the validators refuse.
var (
	poolMsgTypes = []string{"CreateIndex", "DropIndex", vocab.MsgCreateCollection, vocab.MsgCreateCollection,
		vocab.MsgDropCollection, vocab.MsgAlterReplicateConfig, vocab.MsgAlterReplicateConfig, vocab.MsgFlushAll}
	poolIdemKeys    = []string{"", "", "cluster/0/1:a", "db/1/1:a", "coll/5/1:a", "coll/5/1:b", "coll/6/3:a:b"}
	poolBadIdemKeys = []string{"a", "db/1/2:a", "coll/05/1:a", "cluster/1/1:a"}
	poolReasons     = []string{"operator", "callback keeps failing", ""}
	poolRKs         = []*logpb.ResourceKey{
		rk(rkDB, "db", true), rk(rkDB, "db", false), rk(rkCollection, "db:c", false), rk(rkCollection, "db:c", true),
		rk(rkCluster, "", false), rk(logpb.ResourceDomain_RK_PRIVILEGE, "", false),
	}
	poolLifetimes = []int64{1, 1000, 100_000, 1_000_000, 0}
)

// genBroadcastCommand draws a broadcaster command against s: creates
// (with and without idempotency keys) over existing pchannels and the
// cchannel, plausible acks for pending tasks, completions (mostly of fully
// acked tasks), abandonments and prunes.
func genBroadcastCommand(t *rapid.T, label string, s *State) commands.Command {
	switch rapid.IntRange(0, 13).Draw(t, label+".bcKind") {
	case 0, 1, 2, 3:
		return genCreateBroadcast(t, label, s)
	case 4, 5, 6, 7:
		return genAckBroadcast(t, label, s)
	case 8, 9:
		return cmd(&logpb.CompleteBroadcast{BroadcastId: pickBroadcast(t, label+".complete", s, readyTask)})
	case 10:
		return genCompleteWithCheckpoints(t, label, s)
	case 11:
		// Any task: abandoning pending ones too eagerly starves completions.
		return cmd(&logpb.AbandonBroadcast{BroadcastId: pickBroadcast(t, label+".abandon", s, anyTask),
			Reason: rapid.SampledFrom(poolReasons).Draw(t, label+".reason")})
	case 13:
		// Forget dropped VChannels (DropCollection completions make them),
		// with a term that is mostly the leader's.
		term := rapid.SampledFrom([]uint64{s.EstablishedTerm(), s.EstablishedTerm(), s.EstablishedTerm() + 1}).Draw(t, label+".pruneTerm")
		return cmd(&logpb.PruneDroppedVChannels{RetentionMs: 1000, MaxCount: rapid.Uint32Range(1, 3).Draw(t, label+".pruneMax"),
			DecisionTerm: term}, withProposedAt(1<<40))
	default:
		return cmd(&logpb.PruneBroadcastTombstones{MaxCount: rapid.Uint32Range(0, 3).Draw(t, label+".maxCount"),
			MaxLifetimeMs: rapid.SampledFrom(poolLifetimes).Draw(t, label+".lifetime")})
	}
}

// broadcastCandidates are target names over s's pchannels: the pchannels
// themselves, their cchannel names and a few vchannels.
func broadcastCandidates(s *State) []string {
	names := pchannelNames(s)
	if len(names) == 0 {
		names = poolPChannels
	}
	var out []string
	for _, p := range names {
		out = append(out, p, vocab.CChannelName(p), vocab.VChannelName(p, 5, 0), vocab.VChannelName(p, 6, 1))
	}
	return out
}

func genCreateBroadcast(t *rapid.T, label string, s *State) commands.Command {
	b := &logpb.CreateBroadcast{MessageType: rapid.SampledFrom(poolMsgTypes).Draw(t, label+".type")}
	if rapid.IntRange(0, 29).Draw(t, label+".badType") == 0 {
		b.MessageType = "Bad-Type"
	}
	var targets []string
	if cch := s.CChannel(); cch != "" && rapid.IntRange(0, 9).Draw(t, label+".withCChannel") > 0 {
		targets = append(targets, cch)
	}
	cands := broadcastCandidates(s)
	if rapid.IntRange(0, 19).Draw(t, label+".unknownTarget") == 0 {
		cands = append(cands, "dml_99", vocab.VChannelName("dml_98", 5, 0))
	}
	for _, v := range rapid.SliceOfNDistinct(rapid.SampledFrom(cands), 0, 3, rapid.ID[string]).Draw(t, label+".targets") {
		if len(targets) == 0 || v != targets[0] || rapid.IntRange(0, 19).Draw(t, label+".dupTarget") == 0 {
			targets = append(targets, v)
		}
	}
	if len(targets) == 0 {
		targets = []string{vocab.CChannelName(poolPChannels[0])}
	}
	b.Vchannels = targets
	switch b.MessageType {
	case vocab.MsgCreateCollection:
		p := &logpb.CreateCollectionPayload{
			CollectionId: rapid.Int64Range(0, 6).Draw(t, label+".coll"), Shards: rapid.SampledFrom([]uint32{1, 1, 2, 3, 0}).Draw(t, label+".shards")}
		b.Payload = mustMarshalRapid(t, p)
		// Mostly the targets the broadcaster would choose.
		if plan, r := s.PlanCollectionVChannels(p.CollectionId, p.Shards); r == nil && s.CChannel() != "" && rapid.IntRange(0, 4).Draw(t, label+".planned") > 0 {
			b.Vchannels = append([]string{s.CChannel()}, plan...)
		}
	case vocab.MsgDropCollection:
		b.Payload = mustMarshalRapid(t, &logpb.DropCollectionPayload{CollectionId: rapid.Int64Range(0, 6).Draw(t, label+".coll")})
	case vocab.MsgAlterReplicateConfig:
		b.Payload = mustMarshalRapid(t, genReplicateMostlyPrimary(t, label+".cfg", s).Body.(*logpb.UpdateReplicateConfiguration).Config)
		// Mostly as the broadcaster sends it: every pchannel, the exclusive Cluster key.
		if s.CChannel() != "" && rapid.IntRange(0, 4).Draw(t, label+".asSent") > 0 {
			b.Vchannels = s.ClusterTargets(true)
			b.ResourceKeys = []*logpb.ResourceKey{rk(rkCluster, "", false)}
		}
	case vocab.MsgFlushAll:
	default:
		b.Payload = rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, label+".payload")
	}
	if rapid.IntRange(0, 19).Draw(t, label+".garbage") == 0 {
		b.Payload = []byte{0xff}
	}
	b.IdempotencyKey = rapid.SampledFrom(poolIdemKeys).Draw(t, label+".key")
	if tasks := s.BroadcastTasks(); len(tasks) > 0 && rapid.IntRange(0, 5).Draw(t, label+".sameScope") == 0 {
		// The scope of an existing task (pending or tombstoned): a retry.
		like := rapid.SampledFrom(tasks).Draw(t, label+".like")
		b.MessageType, b.IdempotencyKey = like.MessageType, like.IdempotencyKey
	}
	if rapid.IntRange(0, 29).Draw(t, label+".badKey") == 0 {
		b.IdempotencyKey = rapid.SampledFrom(poolBadIdemKeys).Draw(t, label+".bad")
	}
	for _, i := range rapid.SliceOfN(rapid.IntRange(0, len(poolRKs)-1), 0, 3).Draw(t, label+".rks") {
		b.ResourceKeys = append(b.ResourceKeys, proto.Clone(poolRKs[i]).(*logpb.ResourceKey))
	}
	b.AckSyncUp = rapid.Bool().Draw(t, label+".ackSyncUp")
	if rapid.IntRange(0, 3).Draw(t, label+".ordered") == 0 {
		// Ordered behind tasks (a leader's pipelined create): pending,
		// tombstoned, pruned or never created.
		ids := rapid.SliceOfNDistinct(rapid.Custom(func(t *rapid.T) uint64 { return pickBroadcast(t, label+".after", s, anyTask) }),
			1, 3, rapid.ID[uint64]).Draw(t, label+".afterIDs")
		for _, id := range ids {
			if id != 0 {
				b.AfterBroadcasts = append(b.AfterBroadcasts, id)
			}
		}
	}
	return cmd(b)
}

// neverCreated reports whether b is ordered behind an ID no task had.
func neverCreated(s *State, b *logpb.CreateBroadcast) bool {
	for _, id := range b.AfterBroadcasts {
		if id >= s.NextID() {
			return true
		}
	}
	return false
}

// orderBlocked names a task b is ordered behind that is not finished in s.
func orderBlocked(s *State, b *logpb.CreateBroadcast) (uint64, bool) {
	if neverCreated(s, b) {
		return 0, false // refused as invalid first
	}
	for _, id := range b.AfterBroadcasts {
		if task, ok := s.BroadcastTask(id); ok && task.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
			return id, true
		}
	}
	return 0, false
}

// Task preferences of pickBroadcast.
const (
	anyTask     = iota
	unackedTask // pending, some target not acked (for acks)
	readyTask   // pending, every target acked (for completions)
)

// pickBroadcast draws a task ID: mostly an existing task of the preferred
// kind, sometimes any task or any ID.
func pickBroadcast(t *rapid.T, label string, s *State, prefer int) uint64 {
	tasks := s.BroadcastTasks()
	var preferred []uint64
	for _, task := range tasks {
		if task.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			continue
		}
		if prefer == unackedTask && !AllAcked(task) || prefer == readyTask && AllAcked(task) {
			preferred = append(preferred, task.Id)
		}
	}
	switch k := rapid.IntRange(0, 9).Draw(t, label+".pick"); {
	case k == 0 || len(tasks) == 0:
		return rapid.Uint64Range(0, s.NextID()+1).Draw(t, label+".anyID")
	case k >= 3 && len(preferred) > 0:
		return rapid.SampledFrom(preferred).Draw(t, label+".preferred")
	default:
		return rapid.SampledFrom(tasks).Draw(t, label+".task").Id
	}
}

// genAckBroadcast acks a task's targets with plausible checkpoints: mostly
// every target not acked yet, sometimes a re-ack with another checkpoint,
// a non-target, or an invalid checkpoint.
func genAckBroadcast(t *rapid.T, label string, s *State) commands.Command {
	id := pickBroadcast(t, label+".ack", s, unackedTask)
	b := &logpb.AckBroadcast{BroadcastId: id}
	cp := func(l, v string) *logpb.VChannelCheckpoint {
		c := &logpb.VChannelCheckpoint{Vchannel: v, Term: rapid.Int64Range(1, 3).Draw(t, l+".term"),
			Offset: rapid.Uint64Range(0, 100).Draw(t, l+".offset"), TimeTick: rapid.Uint64Range(1, 1000).Draw(t, l+".tt")}
		if rapid.IntRange(0, 49).Draw(t, l+".invalid") == 0 {
			c.Term, c.TimeTick = 0, 0
		}
		return c
	}
	if task, ok := s.BroadcastTask(id); ok {
		all := rapid.IntRange(0, 2).Draw(t, label+".all") > 0
		for i, v := range task.Vchannels {
			_, acked := Acked(task, v)
			l := fmt.Sprintf("%s.cp[%d]", label, i)
			if (!acked && (all || rapid.Bool().Draw(t, l+".pick"))) || (acked && rapid.IntRange(0, 9).Draw(t, l+".reack") == 0) {
				b.Checkpoints = append(b.Checkpoints, cp(l, v))
			}
		}
	}
	if len(b.Checkpoints) == 0 || rapid.IntRange(0, 9).Draw(t, label+".extra") == 0 {
		b.Checkpoints = append(b.Checkpoints, cp(label+".extra", rapid.SampledFrom(broadcastCandidates(s)).Draw(t, label+".extraTarget")))
	}
	return cmd(b)
}

// genCompleteWithCheckpoints draws a completion carrying the last acks
// (CompleteBroadcast v2): a checkpoint for the unacked targets of a
// pending task, now and then one short or one for a non-target.
func genCompleteWithCheckpoints(t *rapid.T, label string, s *State) commands.Command {
	ack := genAckBroadcast(t, label+".last", s).Body.(*logpb.AckBroadcast)
	b := &logpb.CompleteBroadcast{BroadcastId: ack.BroadcastId, Checkpoints: ack.Checkpoints}
	if task, ok := s.BroadcastTask(b.BroadcastId); ok && rapid.IntRange(0, 3).Draw(t, label+".full") > 0 {
		b.Checkpoints = nil
		for i, v := range task.Vchannels {
			if _, acked := Acked(task, v); !acked {
				b.Checkpoints = append(b.Checkpoints, &logpb.VChannelCheckpoint{Vchannel: v, Term: 1, Offset: uint64(i),
					TimeTick: rapid.Uint64Range(1, 1000).Draw(t, fmt.Sprintf("%s.tt[%d]", label, i))})
			}
		}
		if len(b.Checkpoints) == 0 {
			b.Checkpoints = ack.Checkpoints
		}
	}
	return cmd(b)
}

// genReplicateMostlyPrimary is genReplicate, but a configuration that
// would make this cluster a secondary is mostly turned around: on a
// secondary every create is refused, which would starve the rest of a log.
func genReplicateMostlyPrimary(t *rapid.T, label string, s *State) commands.Command {
	c := genReplicate(t, label, s)
	cfg := c.Body.(*logpb.UpdateReplicateConfiguration).Config
	for _, e := range cfg.Topology {
		if e.TargetClusterId == s.ChannelsMeta().ClusterId && rapid.IntRange(0, 3).Draw(t, label+".stayPrimary") > 0 {
			e.SourceClusterId, e.TargetClusterId = e.TargetClusterId, e.SourceClusterId
		}
	}
	return c
}

func mustMarshalRapid(t *rapid.T, m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// ---- step properties ------------------------------------------------------------------

// checkBroadcastStep checks what one entry did to the broadcaster, on top of
// CheckInvariants: across the entry (tasks only move forward, acked
// checkpoints and tombstones never change, IDs are never reused), and per
// command by re-applying the entry's commands one at a time (the invariants
// each command kind must keep, docs/semantics.md#broadcast-invariants).
func checkBroadcastStep(t *rapid.T, prev, next *State, cmds []commands.Command, results []*logpb.Result) {
	for _, pt := range prev.BroadcastTasks() {
		nt, ok := next.BroadcastTask(pt.Id)
		if !ok {
			continue // pruned (checked per command below)
		}
		// A tombstone keeps no payload; until then the payload never changes.
		payloadKept := bytes.Equal(pt.Payload, nt.Payload) || nt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE && len(nt.Payload) == 0
		if nt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE && len(nt.Payload) != 0 {
			t.Fatalf("tombstone %d kept its %d-byte payload", nt.Id, len(nt.Payload))
		}
		if pt.MessageType != nt.MessageType || !payloadKept || pt.IdempotencyKey != nt.IdempotencyKey ||
			pt.AckSyncUp != nt.AckSyncUp || pt.CreatedMs != nt.CreatedMs || fmt.Sprint(pt.Vchannels) != fmt.Sprint(nt.Vchannels) ||
			len(pt.ResourceKeys) != len(nt.ResourceKeys) {
			t.Fatalf("broadcast %d changed what it broadcasts:\n %v\n %v", pt.Id, pt, nt)
		}
		if pt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE && !proto.Equal(pt, nt) {
			t.Fatalf("tombstone %d changed:\n %v\n %v", pt.Id, pt, nt)
		}
		for _, cp := range pt.Acked {
			if got, ok := Acked(nt, cp.Vchannel); !ok || !proto.Equal(got, cp) {
				t.Fatalf("broadcast %d: checkpoint of %s changed from %v to %v", pt.Id, cp.Vchannel, cp, got)
			}
		}
		if nt.CallbackAttempts < pt.CallbackAttempts {
			t.Fatalf("broadcast %d: callback attempts went back", pt.Id)
		}
	}
	for _, nt := range next.BroadcastTasks() {
		if _, ok := prev.BroadcastTask(nt.Id); !ok && nt.Id < prev.NextID() {
			t.Fatalf("new broadcast %d reuses an id below the previous NextID %d", nt.Id, prev.NextID())
		}
		if nt.Id == 0 || nt.Id >= next.NextID() {
			t.Fatalf("broadcast id %d, NextID %d", nt.Id, next.NextID())
		}
		if nt.State == logpb.BroadcastState_BROADCAST_TOMBSTONE && !AllAcked(nt) && nt.AbandonedReason == "" {
			t.Fatalf("broadcast %d is a TOMBSTONE with %d of %d targets acked and not abandoned", nt.Id, len(nt.Acked), len(nt.Vchannels))
		}
	}

	// Command by command.
	cur := prev
	for i, c := range cmds {
		nx, rs, err := cur.ApplyCommands(cur.AppliedIndex()+1, c)
		if err != nil {
			t.Fatalf("re-apply command %d: %v", i, err)
		}
		r := rs[0]
		isBroadcast := c.Type >= commands.TypeCreateBroadcast && c.Type <= commands.TypePruneBroadcastTombstones
		if !isBroadcast && (cur.bc.tasks != nx.bc.tasks || cur.bc.meta != nx.bc.meta || cur.bc.idem != nx.bc.idem ||
			cur.bc.tombstones != nx.bc.tombstones || cur.bc.pending != nx.bc.pending) {
			t.Fatalf("command %d (%s) touched the broadcaster", i, c.Type)
		}
		if c.Type != commands.TypePruneBroadcastTombstones {
			for _, task := range cur.BroadcastTasks() {
				if _, ok := nx.BroadcastTask(task.Id); !ok {
					t.Fatalf("command %d (%s) removed broadcast %d", i, c.Type, task.Id)
				}
			}
		}
		// A repeated request ID answers with an earlier result (which may
		// depend on the index it was applied at); only check what ran.
		if _, repeated := cur.LookupRequest(c.RequestID); isBroadcast && !(c.RequestID != "" && repeated) {
			if !proto.Equal(r, results[i]) {
				t.Fatalf("command %d (%s) alone gives %v, in its entry %v", i, c.Type, r, results[i])
			}
			checkBroadcastCommand(t, cur, nx, c, r)
		}
		cur = nx
	}
}

// checkBroadcastCommand checks one broadcaster command that really ran
// (not answered from the request-ID table) from cur to nx.
func checkBroadcastCommand(t *rapid.T, cur, nx *State, c commands.Command, r *logpb.Result) {
	if r.Rejection != nil {
		if !bytes.Equal(snapshotBytes(t, unchangedFrom(cur, nx)), snapshotBytes(t, nx)) {
			t.Fatalf("%s was rejected (%v) but changed the state", c.Type, r.Rejection)
		}
	}
	stale := c.LeaderTerm != 0 && c.LeaderTerm < cur.EstablishedTerm()
	switch b := c.Body.(type) {
	case *logpb.CreateBroadcast:
		var holder *logpb.BroadcastTask
		if b.IdempotencyKey != "" {
			holder, _ = cur.BroadcastByIdempotencyKey(b.MessageType, b.IdempotencyKey)
		}
		blocker, blocked := orderBlocked(cur, b)
		if blocked && !stale && commands.Validate(c) == nil && r.GetRejection().GetCode() != logpb.RejectCode_REJECT_ORDER {
			// Nothing is decided before the tasks it is ordered behind
			// have finished (docs/semantics.md#resource-keys).
			t.Fatalf("a create ordered behind unfinished broadcast %d was answered %v", blocker, r)
		}
		if r.Rejection != nil {
			if holder != nil && !stale && !blocked && !neverCreated(cur, b) && commands.Validate(c) == nil {
				t.Fatalf("a valid create in the scope of broadcast %d was rejected: %v", holder.Id, r.Rejection)
			}
			return
		}
		got := r.GetBroadcast()
		if holder != nil {
			// The same scope inside the window is one task, one ID
			// (docs/semantics.md#idempotency-keys).
			if got.BroadcastId != holder.Id || !got.Duplicated || nx.NextID() != cur.NextID() ||
				len(nx.BroadcastTasks()) != len(cur.BroadcastTasks()) {
				t.Fatalf("create in the scope of broadcast %d returned %v (tasks %d -> %d)", holder.Id, got,
					len(cur.BroadcastTasks()), len(nx.BroadcastTasks()))
			}
			return
		}
		if got.Duplicated || got.BroadcastId != cur.NextID() || nx.NextID() != cur.NextID()+1 {
			t.Fatalf("new broadcast %v with NextID %d -> %d", got, cur.NextID(), nx.NextID())
		}
		task, ok := nx.BroadcastTask(got.BroadcastId)
		if !ok || task.State != logpb.BroadcastState_BROADCAST_PENDING || len(task.Acked) != 0 {
			t.Fatalf("created broadcast %d: %v", got.BroadcastId, task)
		}
		want := append([]string(nil), b.Vchannels...)
		sort.Strings(want)
		if fmt.Sprint(task.Vchannels) != fmt.Sprint(want) || !isTarget(task, nx.CChannel()) {
			t.Fatalf("broadcast %d targets %v, asked for %v (cchannel %s)", task.Id, task.Vchannels, b.Vchannels, nx.CChannel())
		}
		if nk := commands.NormalizeResourceKeys(b.ResourceKeys); len(nk) != len(task.ResourceKeys) {
			t.Fatalf("broadcast %d keys %v, want %v", task.Id, task.ResourceKeys, nk)
		} else {
			for i := range nk {
				if !proto.Equal(nk[i], task.ResourceKeys[i]) {
					t.Fatalf("broadcast %d keys %v, want %v", task.Id, task.ResourceKeys, nk)
				}
			}
		}
		if b.IdempotencyKey != "" {
			if h, ok := nx.BroadcastByIdempotencyKey(b.MessageType, b.IdempotencyKey); !ok || h.Id != task.Id {
				t.Fatalf("broadcast %d does not hold its idempotency scope", task.Id)
			}
		}
	case *logpb.AckBroadcast:
		if r.Rejection != nil {
			return
		}
		before, ok := cur.BroadcastTask(b.BroadcastId)
		after, _ := nx.BroadcastTask(b.BroadcastId)
		if !ok || before.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
			if r.GetNumber() != 0 || ok && !proto.Equal(before, after) {
				t.Fatalf("ack of a finished or unknown broadcast %d did something: %v", b.BroadcastId, r)
			}
			return
		}
		added := map[string]*logpb.VChannelCheckpoint{}
		for _, cp := range b.Checkpoints {
			if _, done := Acked(before, cp.Vchannel); !done && isTarget(before, cp.Vchannel) && added[cp.Vchannel] == nil {
				added[cp.Vchannel] = cp
			}
		}
		if r.GetNumber() != uint64(len(added)) || len(after.Acked) != len(before.Acked)+len(added) {
			t.Fatalf("ack of broadcast %d: %d recorded, %d acked before, %d after, expected %d new", b.BroadcastId,
				r.GetNumber(), len(before.Acked), len(after.Acked), len(added))
		}
		for v, cp := range added {
			if got, _ := Acked(after, v); !proto.Equal(got, cp) {
				t.Fatalf("broadcast %d: %s acked at %v, want the first checkpoint %v", b.BroadcastId, v, got, cp)
			}
		}
	case *logpb.CompleteBroadcast:
		before, ok := cur.BroadcastTask(b.BroadcastId)
		if ok && len(b.Checkpoints) > 0 && before.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
			// The carried acks count only when they leave every target
			// acked; then the completion behaves as if an ack of them had
			// just been applied.
			if withCps, added := withAcks(before, b.Checkpoints); added > 0 && AllAcked(withCps) && !before.AckSyncUp {
				before = withCps
				cur = unchangedFrom(cur, cur)
				cur.bc.put(withCps)
			}
		}
		if r.Rejection != nil {
			code := r.Rejection.Code
			if ok && code == logpb.RejectCode_REJECT_CONFLICT && AllAcked(before) && !(len(b.Checkpoints) > 0 && before.AckSyncUp) {
				t.Fatalf("complete of fully acked broadcast %d refused: %v", b.BroadcastId, r.Rejection)
			}
			return
		}
		after, _ := nx.BroadcastTask(b.BroadcastId)
		comp := r.GetCompletion()
		switch {
		case before.State == logpb.BroadcastState_BROADCAST_TOMBSTONE:
			if !comp.Tombstoned || !bytes.Equal(snapshotBytes(t, unchangedFrom(cur, nx)), snapshotBytes(t, nx)) {
				t.Fatalf("repeat complete of tombstone %d: %v, or it changed the state", b.BroadcastId, comp)
			}
		case !AllAcked(before):
			t.Fatalf("broadcast %d completed with %d of %d acked", b.BroadcastId, len(before.Acked), len(before.Vchannels))
		case comp.Tombstoned:
			if after.State != logpb.BroadcastState_BROADCAST_TOMBSTONE || after.AbandonedReason != "" ||
				after.TombstonedMs != c.ProposedAtUnixMs || after.TombstoneSeq != cur.bc.meta.NextTombstoneSeq {
				t.Fatalf("completed broadcast %d: %v", b.BroadcastId, after)
			}
			checkCallbackEffect(t, cur, nx, before)
		default:
			// Refused: the failure record is the only change.
			want := proto.Clone(before).(*logpb.BroadcastTask)
			want.CallbackAttempts++
			want.LastError, want.LastErrorMs = comp.CallbackError, c.ProposedAtUnixMs
			exp := unchangedFrom(cur, nx)
			exp.bc.put(want)
			if comp.CallbackError == "" || !bytes.Equal(snapshotBytes(t, exp), snapshotBytes(t, nx)) {
				t.Fatalf("refused callback of broadcast %d (%q) changed more than its failure record", b.BroadcastId, comp.CallbackError)
			}
		}
	case *logpb.AbandonBroadcast:
		if r.Rejection != nil {
			return
		}
		before, _ := cur.BroadcastTask(b.BroadcastId)
		want := proto.Clone(before).(*logpb.BroadcastTask)
		want.State, want.AbandonedReason, want.Payload = logpb.BroadcastState_BROADCAST_TOMBSTONE, b.Reason, nil
		want.TombstonedMs, want.TombstoneSeq = c.ProposedAtUnixMs, cur.bc.meta.NextTombstoneSeq
		if got, _ := nx.BroadcastTask(b.BroadcastId); before.State == logpb.BroadcastState_BROADCAST_TOMBSTONE || !proto.Equal(got, want) {
			t.Fatalf("abandoned broadcast %d: %v, want %v", b.BroadcastId, got, want)
		}
		if !sameChannelView(cur, nx) {
			t.Fatalf("abandoning broadcast %d ran its callback", b.BroadcastId)
		}
	case *logpb.PruneBroadcastTombstones:
		if r.Rejection != nil {
			return
		}
		order := tombstoneIDs(cur)
		dropped := int(r.GetNumber())
		if nx.TombstoneCount() != cur.TombstoneCount()-dropped || nx.TombstoneCount() > int(b.MaxCount) {
			t.Fatalf("prune(max %d): %d tombstones -> %d, reported %d dropped", b.MaxCount, cur.TombstoneCount(), nx.TombstoneCount(), dropped)
		}
		if fmt.Sprint(tombstoneIDs(nx)) != fmt.Sprint(order[dropped:]) {
			t.Fatalf("prune did not drop the oldest: %v -> %v", order, tombstoneIDs(nx))
		}
		cutoff := c.ProposedAtUnixMs - b.MaxLifetimeMs
		if cutoff > c.ProposedAtUnixMs {
			cutoff = math.MinInt64
		}
		if rest := tombstoneIDs(nx); len(rest) > 0 {
			if head, _ := nx.BroadcastTask(rest[0]); head.TombstonedMs <= cutoff {
				t.Fatalf("prune at %d (lifetime %d) kept tombstone %d from %d", c.ProposedAtUnixMs, b.MaxLifetimeMs, head.Id, head.TombstonedMs)
			}
		}
		for _, id := range order[:dropped] {
			gone, _ := cur.BroadcastTask(id)
			if gone.IdempotencyKey != "" {
				if _, ok := nx.BroadcastByIdempotencyKey(gone.MessageType, gone.IdempotencyKey); ok {
					t.Fatalf("pruned broadcast %d still holds its idempotency scope", id)
				}
			}
		}
		cp, np := cur.PendingBroadcasts(), nx.PendingBroadcasts()
		if len(cp) != len(np) {
			t.Fatalf("prune touched pending tasks: %d -> %d", len(cp), len(np))
		}
		for i := range cp {
			if !proto.Equal(cp[i], np[i]) {
				t.Fatalf("prune changed pending task %d", cp[i].Id)
			}
		}
	}
}

// checkCallbackEffect checks what a completed task's callback did.
func checkCallbackEffect(t *rapid.T, cur, nx *State, task *logpb.BroadcastTask) {
	switch task.MessageType {
	case vocab.MsgCreateCollection:
		var p logpb.CreateCollectionPayload
		_ = proto.Unmarshal(task.Payload, &p)
		if coll, ok := nx.Collection(p.CollectionId); !ok || len(coll.Vchannels) != int(p.Shards) || !sameSet(coll.Vchannels, collectionVChannels(nx, task.Vchannels)) {
			t.Fatalf("CreateCollection %d/%d to %v completed, collection %v", p.CollectionId, p.Shards, task.Vchannels, coll)
		}
	case vocab.MsgDropCollection:
		var p logpb.DropCollectionPayload
		_ = proto.Unmarshal(task.Payload, &p)
		if _, ok := nx.Collection(p.CollectionId); ok {
			t.Fatalf("DropCollection %d completed, the collection is still there", p.CollectionId)
		}
	case vocab.MsgAlterReplicateConfig:
		var cfg logpb.ReplicateConfiguration
		_ = proto.Unmarshal(task.Payload, &cfg)
		if !proto.Equal(nx.ReplicateConfiguration(), &cfg) {
			t.Fatalf("AlterReplicateConfig completed, config %v, want %v", nx.ReplicateConfiguration(), &cfg)
		}
	case vocab.MsgFlushAll:
		if id, ticks := nx.FlushAllTicks(); id != task.Id || len(ticks) == 0 {
			t.Fatalf("FlushAll %d completed, flush-all record %d %v", task.Id, id, ticks)
		}
	default:
		if !sameChannelView(cur, nx) {
			t.Fatalf("%s has no callback, but completing it changed the channel view", task.MessageType)
		}
	}
}

// unchangedFrom is cur as nx should be if the command changed nothing but
// the applied index and the request-ID table.
func unchangedFrom(cur, nx *State) *State {
	c := *cur
	c.applied, c.dedup = nx.applied, nx.dedup
	return &c
}

// ---- broadcaster property test ------------------------------------------------------

// genBroadcastOnly draws mostly broadcaster commands, plus the channel
// commands their callbacks interact with (vchannel allocation and drops,
// replication changes, new pchannels) and now and then a new leader.
func genBroadcastOnly(t *rapid.T, label string, s *State) commands.Command {
	var c commands.Command
	switch k := rapid.IntRange(0, 19).Draw(t, label+".mix"); {
	case k == 0:
		c = leaderEstablished(s.EstablishedTerm()+rapid.Uint64Range(0, 1).Draw(t, label+".term"), "c1")
	case k == 1:
		c = allocV(rapid.Int64Range(1, 6).Draw(t, label+".coll"), rapid.Uint32Range(1, 3).Draw(t, label+".count"))
	case k == 2:
		c = dropV(rapid.Int64Range(1, 6).Draw(t, label+".coll"))
	case k == 3:
		c = genReplicateMostlyPrimary(t, label, s)
	case k == 4:
		c = addPCh(rapid.SampledFrom([]string{"dml_4", "dml_5"}).Draw(t, label+".pchannel"))
	default:
		c = genBroadcastCommand(t, label, s)
	}
	c.ProposedAtUnixMs = rapid.Int64Range(0, 1_000_000).Draw(t, label+".at")
	if rapid.IntRange(0, 14).Draw(t, label+".hasRequestID") == 0 {
		c.RequestID = rapid.SampledFrom(poolRequestIDs).Draw(t, label+".requestID")
	}
	if rapid.IntRange(0, 19).Draw(t, label+".stale") == 0 {
		c.LeaderTerm = 1
	}
	return c
}

// TestBroadcastProperties drives the broadcaster with random, mostly plausible
// command streams from an initialized cluster. checkBroadcastStep runs after
// every entry (via replayWith); this test also tracks the idempotency window
// (docs/semantics.md#idempotency-keys) across the whole log (a scope yields a
// new ID only after its task was pruned), checks the restored state behaves
// identically, and that the generator reaches every interesting outcome.
func TestBroadcastProperties(t *testing.T) {
	reached := map[string]int{}
	want := []string{"duplicate", "duplicate of a tombstone", "scope reused after prune", "callback refused",
		"completed CreateIndex", "completed " + vocab.MsgCreateCollection, "completed " + vocab.MsgDropCollection,
		"completed " + vocab.MsgAlterReplicateConfig, "completed " + vocab.MsgFlushAll,
		"abandoned", "pruned", "acked", "pending at the end", "completed by its carried acks", "carried acks refused"}
	missing := func() (out []string) {
		for _, k := range want {
			if reached[k] == 0 {
				out = append(out, k)
			}
		}
		return out
	}
	start := build(t, base()...) // immutable: shared by every run
	// Usually one pass reaches every outcome; rare ones may need another.
	for pass := 0; pass < 4 && len(missing()) > 0 && !t.Failed(); pass++ {
		broadcastPropertiesPass(t, start, reached)
	}
	t.Logf("reached %v", reached)
	if m := missing(); len(m) > 0 {
		t.Errorf("the generator never reached %q", m)
	}
}

func broadcastPropertiesPass(t *testing.T, start *State, reached map[string]int) {
	rapid.Check(t, func(t *rapid.T) {
		s := start
		log := genEntriesWith(t, "log", s, 60, genBroadcastOnly)
		scopes := map[string]uint64{} // idempotency scope -> the last ID it yielded
		end, _ := replayWith(t, s, log, func(t *rapid.T, prev, next *State, cmds []commands.Command, results []*logpb.Result) {
			for i, c := range cmds {
				r := results[i]
				if b, ok := c.Body.(*logpb.CompleteBroadcast); ok && len(b.Checkpoints) > 0 && r.GetRejection().GetCode() == logpb.RejectCode_REJECT_CONFLICT {
					reached["carried acks refused"]++
				}
				if r.Rejection != nil || c.RequestID != "" {
					continue // a request ID may answer with another command's result
				}
				switch b := c.Body.(type) {
				case *logpb.CreateBroadcast:
					got := r.GetBroadcast()
					if got.Duplicated {
						reached["duplicate"]++
						if h, ok := prev.BroadcastTask(got.BroadcastId); ok && h.State == logpb.BroadcastState_BROADCAST_TOMBSTONE {
							reached["duplicate of a tombstone"]++
						}
					}
					if b.IdempotencyKey == "" {
						continue
					}
					scope := idemScope(b.MessageType, b.IdempotencyKey)
					if last, seen := scopes[scope]; seen && last != got.BroadcastId {
						// A new ID for a known scope: the old task must be gone.
						if _, ok := next.BroadcastTask(last); ok {
							t.Fatalf("scope %q yielded %d while broadcast %d still holds it", scope, got.BroadcastId, last)
						}
						reached["scope reused after prune"]++
					}
					scopes[scope] = got.BroadcastId
				case *logpb.CompleteBroadcast:
					task, pending := prev.BroadcastTask(b.BroadcastId)
					pending = pending && task.State != logpb.BroadcastState_BROADCAST_TOMBSTONE
					switch comp := r.GetCompletion(); {
					case len(b.Checkpoints) > 0 && pending && comp.GetTombstoned() && !AllAcked(task):
						reached["completed by its carried acks"]++
					case !comp.Tombstoned:
						reached["callback refused"]++
					default:
						if task, ok := prev.BroadcastTask(b.BroadcastId); ok && task.State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
							reached["completed "+task.MessageType]++
						}
					}
				case *logpb.AbandonBroadcast:
					reached["abandoned"]++
				case *logpb.PruneBroadcastTombstones:
					if r.GetNumber() > 0 {
						reached["pruned"]++
					}
				case *logpb.AckBroadcast:
					if r.GetNumber() > 0 {
						reached["acked"]++
					}
				}
			}
		})
		if len(end.PendingBroadcasts()) > 0 {
			reached["pending at the end"]++
		}
		// The restored state answers and evolves identically.
		r := restore(t, end)
		suffix := genEntriesWith(t, "suffix", end, 10, genBroadcastOnly)
		a, ra := replay(t, end, suffix)
		b, rb := replay(t, r, suffix)
		equalResults(t, "original vs restored", ra, rb)
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("original and restored states diverged")
		}
	})
}

// TestGeneratorReachesBroadcasts: the general generator (used by
// TestReplicasAgree and TestSnapshotReplay) gets every broadcaster command
// type accepted, so those tests cover the broadcaster too.
func TestGeneratorReachesBroadcasts(t *testing.T) {
	accepted := map[commands.Type]int{}
	missing := func() []commands.Type {
		var out []commands.Type
		for typ := commands.TypeCreateBroadcast; typ <= commands.TypePruneBroadcastTombstones; typ++ {
			if accepted[typ] == 0 {
				out = append(out, typ)
			}
		}
		return out
	}
	// The general generator spreads its draws over every command family, so
	// one round of 100 logs can miss a rare broadcaster outcome; a few more
	// rounds bound the false alarm far below one in a million while a
	// generator that cannot reach a type still fails every round.
	for round := 0; round < 8 && (round == 0 || len(missing()) > 0); round++ {
		checkAccepted(t, accepted)
	}
	t.Logf("accepted %v", accepted)
	for _, typ := range missing() {
		t.Errorf("the generator never got a %s accepted", typ)
	}
}

func checkAccepted(t *testing.T, accepted map[commands.Type]int) {
	rapid.Check(t, func(t *rapid.T) {
		log := genEntries(t, "log", New(), 40)
		_, results := replay(t, New(), log)
		i := 0
		for _, e := range log {
			cmds, _ := commands.DecodeEntry(e.data)
			for _, c := range cmds {
				if results[i].Rejection == nil {
					accepted[c.Type]++
				}
				i++
			}
		}
	})
}
