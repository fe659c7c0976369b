package fsm

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ---- broadcast command builders and fixtures ------------------------------------

// cch is the control channel of the base fixture (bound to p0).
var cch = vocab.CChannelName(p0)

// Vchannels of collections 5 and 6 on p1 and p2 (they need not be
// allocated: a broadcast target only needs its pchannel to exist).
var (
	v15 = vocab.VChannelName(p1, 5, 0)
	v25 = vocab.VChannelName(p2, 5, 1)
	v16 = vocab.VChannelName(p1, 6, 0)
)

const (
	rkCluster    = logpb.ResourceDomain_RK_CLUSTER
	rkDB         = logpb.ResourceDomain_RK_DB_NAME
	rkCollection = logpb.ResourceDomain_RK_COLLECTION_NAME
)

func rk(domain logpb.ResourceDomain, key string, shared bool) *logpb.ResourceKey {
	return &logpb.ResourceKey{Domain: domain, Key: key, Shared: shared}
}

type bcEdit func(b *logpb.CreateBroadcast)

func withIK(key string) bcEdit        { return func(b *logpb.CreateBroadcast) { b.IdempotencyKey = key } }
func withPayload(p []byte) bcEdit     { return func(b *logpb.CreateBroadcast) { b.Payload = p } }
func withTargets(vs ...string) bcEdit { return func(b *logpb.CreateBroadcast) { b.Vchannels = vs } }
func withRK(keys ...*logpb.ResourceKey) bcEdit {
	return func(b *logpb.CreateBroadcast) { b.ResourceKeys = keys }
}

// bcBody is a CreateBroadcast of msgType to the cchannel, edited.
func bcBody(msgType string, edits ...bcEdit) *logpb.CreateBroadcast {
	b := &logpb.CreateBroadcast{MessageType: msgType, Vchannels: []string{cch}}
	for _, e := range edits {
		e(b)
	}
	return b
}

func createB(msgType string, edits ...bcEdit) commands.Command { return cmd(bcBody(msgType, edits...)) }

func cpt(v string, term int64, offset, tt uint64) *logpb.VChannelCheckpoint {
	return &logpb.VChannelCheckpoint{Vchannel: v, Term: term, Offset: offset, TimeTick: tt}
}

func ackB(id uint64, cps ...*logpb.VChannelCheckpoint) commands.Command {
	return cmd(&logpb.AckBroadcast{BroadcastId: id, Checkpoints: cps})
}

// ackAll acks every listed target of id with distinct checkpoints.
func ackAll(id uint64, targets ...string) commands.Command {
	var cps []*logpb.VChannelCheckpoint
	for i, v := range targets {
		cps = append(cps, cpt(v, 1, uint64(i), 1000+uint64(i)))
	}
	return ackB(id, cps...)
}

func completeB(id uint64, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.CompleteBroadcast{BroadcastId: id}, opts...)
}

func abandonB(id uint64, reason string, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.AbandonBroadcast{BroadcastId: id, Reason: reason}, opts...)
}

func pruneB(maxCount uint32, lifetimeMs int64, opts ...cmdOpt) commands.Command {
	return cmd(&logpb.PruneBroadcastTombstones{MaxCount: maxCount, MaxLifetimeMs: lifetimeMs}, opts...)
}

func createdResult(id uint64, dup bool) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Broadcast{Broadcast: &logpb.BroadcastCreated{BroadcastId: id, Duplicated: dup}}}
}

func completionResult(tombstoned bool, callbackErr string) *logpb.Result {
	return &logpb.Result{Value: &logpb.Result_Completion{Completion: &logpb.BroadcastCompletion{Tombstoned: tombstoned, CallbackError: callbackErr}}}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func createCollPayload(t testing.TB, coll int64, shards uint32) []byte {
	return mustMarshal(t, &logpb.CreateCollectionPayload{CollectionId: coll, Shards: shards})
}

func dropCollPayload(t testing.TB, coll int64) []byte {
	return mustMarshal(t, &logpb.DropCollectionPayload{CollectionId: coll})
}

// fourFour is a valid replication configuration for the base fixture: this
// cluster with all four pchannels, replicating to "dr".
func fourFour() *logpb.ReplicateConfiguration {
	return &logpb.ReplicateConfiguration{
		Clusters: []*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2, p3), rcluster("dr", "dr_0", "dr_1", "dr_2", "dr_3")},
		Topology: []*logpb.ReplicateTopology{edge(clusterID, "dr")},
	}
}

func scopedKey(t testing.TB) func(string, error) string {
	return func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func mustTask(t testing.TB, s *State, id uint64) *logpb.BroadcastTask {
	t.Helper()
	task, ok := s.BroadcastTask(id)
	if !ok {
		t.Fatalf("broadcast %d does not exist", id)
	}
	return task
}

// wantTask runs f on task id of the after state.
func wantTask(id uint64, f func(t *testing.T, task *logpb.BroadcastTask)) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		f(t, mustTask(t, after, id))
	}
}

func wantState(id uint64, state logpb.BroadcastState) checkFn {
	return wantTask(id, func(t *testing.T, task *logpb.BroadcastTask) {
		t.Helper()
		if task.State != state {
			t.Fatalf("broadcast %d is %s, want %s", id, task.State, state)
		}
	})
}

func wantNoTask(id uint64) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if task, ok := after.BroadcastTask(id); ok {
			t.Fatalf("broadcast %d still exists: %v", id, task)
		}
	}
}

func wantTaskCount(n int) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if got := len(after.BroadcastTasks()); got != n {
			t.Fatalf("%d broadcast tasks, want %d", got, n)
		}
	}
}

func wantNextID(id uint64) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if after.NextID() != id {
			t.Fatalf("NextID %d, want %d", after.NextID(), id)
		}
	}
}

// channelsUnchanged: the channel subsystem is identical before and after.
func channelsUnchanged(t *testing.T, before, after *State) {
	t.Helper()
	if !sameChannelView(before, after) {
		t.Fatal("the channel view changed")
	}
}

// sameExceptTask fails unless after equals before with task id replaced by
// want (and the applied index moved): the command touched nothing else.
func sameExceptTask(t testing.TB, before, after *State, want *logpb.BroadcastTask) {
	t.Helper()
	exp := *before
	exp.applied = after.applied
	exp.bc.put(want)
	if !bytes.Equal(snapshotBytes(t, &exp), snapshotBytes(t, after)) {
		got, _ := after.BroadcastTask(want.Id)
		t.Fatalf("state changed beyond broadcast %d:\n got task %v\nwant task %v", want.Id, got, want)
	}
}

// ---- CreateBroadcast ------------------------------------------------------------

var exclusiveCluster = rk(rkCluster, "", false)

// shrinkConfig lists this cluster with fewer pchannels than fourFour.
func shrinkConfig(t testing.TB) []byte {
	return mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{rcluster(clusterID, p0), rcluster("dr", "dr_0")}})
}

func TestApplyCreateBroadcast(t *testing.T) {
	notThisCluster := mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{rcluster("other", p0), rcluster("dr", "dr_0")}})
	unknownPChannel := mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{rcluster(clusterID, "dml_9")}})
	secondary := replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2, p3), rcluster("dr", "dr_0", "dr_1", "dr_2", "dr_3")}, edge("dr", clusterID))
	badConfig := mustMarshal(t, &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{rcluster("a", p0), rcluster("a", p1)}})
	runApplyCases(t, []applyCase{
		{
			name:  "the first task takes the next global id",
			setup: base(reserveIDs(10)),
			cmd: cmd(bcBody("CreateIndex", withTargets(v25, cch, p3, v15), withPayload([]byte("opaque")), withIK("db/1/1:k"),
				withRK(rk(rkCollection, "db:c", false), rk(rkDB, "db", true), rk(rkCollection, "db:c", true)),
				func(b *logpb.CreateBroadcast) { b.AckSyncUp = true }), withProposedAt(4242)),
			want: createdResult(11, false),
			check: all(wantNextID(12), channelsUnchanged, wantTask(11, func(t *testing.T, task *logpb.BroadcastTask) {
				want := &logpb.BroadcastTask{
					Id: 11, MessageType: "CreateIndex", Payload: []byte("opaque"),
					ResourceKeys: []*logpb.ResourceKey{rk(rkCollection, "db:c", false), rk(rkDB, "db", true), rk(rkCluster, "", true)},
					Vchannels:    []string{cch, v15, v25, p3}, // sorted by name
					AckSyncUp:    true, IdempotencyKey: "db/1/1:k",
					State: logpb.BroadcastState_BROADCAST_PENDING, CreatedMs: 4242,
				}
				if !proto.Equal(task, want) {
					t.Fatalf("task\n got %v\nwant %v", task, want)
				}
			})),
		},
		{
			name:  "an exclusive cluster key is stored without a shared one",
			setup: base(),
			cmd:   createB(vocab.MsgFlushAll, withRK(rk(rkCluster, "", false))),
			want:  createdResult(1, false),
			check: wantTask(1, func(t *testing.T, task *logpb.BroadcastTask) {
				if len(task.ResourceKeys) != 1 || !proto.Equal(task.ResourceKeys[0], rk(rkCluster, "", false)) {
					t.Fatalf("keys %v", task.ResourceKeys)
				}
			}),
		},
		{
			name:    "streaming not initialized",
			setup:   []commands.Command{leaderEstablished(2, "c1")},
			cmd:     createB("CreateIndex"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "streaming is not initialized",
		},
		{
			name:    "the cchannel must be a target",
			setup:   base(),
			cmd:     createB("CreateIndex", withTargets(v15, p2)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "the control channel " + cch + " must be a target",
		},
		{
			name:    "another pchannel's cchannel is not the cchannel",
			setup:   base(),
			cmd:     createB("CreateIndex", withTargets(vocab.CChannelName(p1))),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "must be a target",
		},
		{
			name:    "a vchannel on an unknown pchannel",
			setup:   base(),
			cmd:     createB("CreateIndex", withTargets(cch, vocab.VChannelName("dml_9", 5, 0))),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "pchannel dml_9 does not exist",
		},
		{
			name:    "an unknown pchannel target",
			setup:   base(),
			cmd:     createB("CreateIndex", withTargets(cch, "dml_7")),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "target dml_7",
		},
		{
			name:    "a secondary cluster does no DDL",
			setup:   base(secondary),
			cmd:     createB("CreateIndex"),
			want:    rejected(logpb.RejectCode_REJECT_NOT_PRIMARY),
			wantMsg: "not primary",
		},
		{
			name:    "shape is validated first",
			setup:   base(),
			cmd:     createB("Create-Index"),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "not allowed",
		},
		{
			name:    "CreateCollection with 0 shards",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 0))),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "CreateCollection payload",
		},
		{
			name:    "CreateCollection with too many shards",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, vocab.MaxVChannelsPerColl+1))),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "shard count must be in 1..1024, got 1025",
		},
		{
			name:    "CreateCollection without a collection id",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 0, 2))),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "collection id must be positive, got 0",
		},
		{
			name:    "CreateCollection with an empty payload",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "CreateCollection payload",
		},
		{
			name:    "CreateCollection with undecodable bytes",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload([]byte{0xff, 0xff})),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "CreateCollection payload",
		},
		{
			name:    "DropCollection without a collection id",
			setup:   base(),
			cmd:     createB(vocab.MsgDropCollection, withPayload(dropCollPayload(t, 0))),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "DropCollection payload",
		},
		{
			name:    "DropCollection with undecodable bytes",
			setup:   base(),
			cmd:     createB(vocab.MsgDropCollection, withPayload([]byte{0x0a})),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "DropCollection payload",
		},
		{
			name:    "AlterReplicateConfig with an invalid config",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload(badConfig)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "listed twice",
		},
		{
			name:    "AlterReplicateConfig with an empty config",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "AlterReplicateConfig payload",
		},
		{
			name:    "AlterReplicateConfig with undecodable bytes",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload([]byte{0x0a, 0x05, 0x01})),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "AlterReplicateConfig payload",
		},
		{
			name:  "valid built-in payloads",
			setup: base(),
			cmd:   createB(vocab.MsgAlterReplicateConfig, withPayload(mustMarshal(t, fourFour())), withRK(exclusiveCluster), withTargets(cch, p1, p2, p3)),
			want:  createdResult(1, false),
		},
		{
			name:    "AlterReplicateConfig without the exclusive cluster key",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload(mustMarshal(t, fourFour())), withTargets(cch, p1, p2, p3)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "must hold the exclusive Cluster resource key",
		},
		{
			name:    "AlterReplicateConfig that misses a pchannel",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload(mustMarshal(t, fourFour())), withRK(exclusiveCluster), withTargets(cch, p1, p3)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "must reach every pchannel; [dml_2] are not targets",
		},
		{
			name:    "AlterReplicateConfig without this cluster is refused at creation",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload(notThisCluster), withRK(exclusiveCluster), withTargets(cch, p1, p2, p3)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: `does not list this cluster "by-dev"`,
		},
		{
			name:    "AlterReplicateConfig with a pchannel this cluster lacks is refused at creation",
			setup:   base(),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload(unknownPChannel), withRK(exclusiveCluster), withTargets(cch, p1, p2, p3)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "dml_9, which this cluster does not have",
		},
		{
			name:    "AlterReplicateConfig incompatible with the installed one is refused at creation",
			setup:   base(replicate(fourFour().Clusters, fourFour().Topology...)),
			cmd:     createB(vocab.MsgAlterReplicateConfig, withPayload(shrinkConfig(t)), withRK(exclusiveCluster), withTargets(cch, p1, p2, p3)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "may only be extended by appending",
		},
		{
			name:    "CreateCollection with another shard count is refused at creation",
			setup:   base(allocV(5, 2)),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 3)), withTargets(append([]string{cch}, vnames(5, p0, p1, p2)...)...)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already has 2 vchannels, not 3",
		},
		{
			name:    "CreateCollection of an existing collection must target its vchannels",
			setup:   base(allocV(5, 2)),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 2)), withTargets(cch, v15, v25)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "must target exactly those",
		},
		{
			name:  "CreateCollection of an existing collection on its vchannels (a retry)",
			setup: base(allocV(5, 2)),
			cmd:   createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 2)), withTargets(append([]string{cch}, vnames(5, p0, p1)...)...)),
			want:  createdResult(1, false),
		},
		{
			name:    "CreateCollection with fewer targets than shards",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 3)), withTargets(cch, v15, v25)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "has 3 shards but the broadcast targets 2 vchannels",
		},
		{
			name:    "CreateCollection targets that name another collection",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 1)), withTargets(cch, v16)),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "is not a vchannel of collection 5",
		},
		{
			name:    "CreateCollection with two shards on one pchannel",
			setup:   base(),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 2)), withTargets(cch, v15, vocab.VChannelName(p1, 5, 1))),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "two shards of collection 5 on pchannel dml_1",
		},
		{
			name:    "CreateCollection on a pchannel unavailable in replication",
			setup:   base(replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1)})),
			cmd:     createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 1)), withTargets(cch, vocab.VChannelName(p3, 5, 0))),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "not available in replication",
		},
		{
			name:  "CreateCollection on any valid placement",
			setup: base(),
			cmd:   createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 2)), withTargets(cch, vocab.VChannelName(p3, 5, 1), v15)),
			want:  createdResult(1, false),
		},
		{
			name:  "a message type without a callback takes any payload",
			setup: base(),
			cmd:   createB("CreateIndex", withPayload([]byte{0xff, 0xff})),
			want:  createdResult(1, false),
		},
		{
			name:  "FlushAll's payload is not interpreted",
			setup: base(),
			cmd:   createB(vocab.MsgFlushAll, withPayload([]byte{0xff})),
			want:  createdResult(1, false),
		},
	})
}

// TestBroadcastIDsShareTheGlobalIDSpace: broadcast IDs come from the same
// counter as ReserveIDs, so the two never hand out the same number.
func TestBroadcastIDsShareTheGlobalIDSpace(t *testing.T) {
	s := build(t, base()...)
	steps := []struct {
		c    commands.Command
		want *logpb.Result
	}{
		{createB("A"), createdResult(1, false)},
		{reserveIDs(5), rangeResult(2, 5)},
		{createB("B"), createdResult(7, false)},
		{createB("C"), createdResult(8, false)},
		{reserveIDs(1), rangeResult(9, 1)},
		{createB("C", withTargets(p1)), rejected(logpb.RejectCode_REJECT_INVALID)}, // refused: consumes no id
		{createB("D"), createdResult(10, false)},
	}
	for i, st := range steps {
		var rs []*logpb.Result
		s, rs = mustApply(t, s, st.c)
		checkResult(t, rs[0], st.want, "")
		if i == len(steps)-1 && s.NextID() != 11 {
			t.Fatalf("NextID %d, want 11", s.NextID())
		}
	}
	// Several creates in one entry get consecutive IDs.
	s, rs := mustApply(t, s, createB("E"), reserveIDs(2), createB("F"))
	checkResult(t, rs[0], createdResult(11, false), "")
	checkResult(t, rs[1], rangeResult(12, 2), "")
	checkResult(t, rs[2], createdResult(14, false), "")
	if s.NextID() != 15 {
		t.Fatalf("NextID %d, want 15", s.NextID())
	}
}

// TestCreateBroadcastIDSpaceExhausted: the last ID is never handed out in a
// way that wraps the counter to 0.
func TestCreateBroadcastIDSpaceExhausted(t *testing.T) {
	s := build(t, base()...)
	s.alloc.nextID = math.MaxUint64 - 1
	s, rs := mustApply(t, s, createB("A"))
	checkResult(t, rs[0], createdResult(math.MaxUint64-1, false), "")
	next, rs := mustApply(t, s, createB("B"))
	checkResult(t, rs[0], rejected(logpb.RejectCode_REJECT_EXHAUSTED), "id space exhausted")
	sameExceptApplied(t, s, next)
}

func TestCreateBroadcastPendingBound(t *testing.T) {
	s := build(t, base()...)
	// Fill the pending bound directly (applying 65536 creates one by one
	// would snapshot a growing state at every step).
	for id := uint64(1); id <= MaxPendingBroadcasts; id++ {
		s.bc.put(&logpb.BroadcastTask{Id: id, MessageType: "X", Vchannels: []string{cch}, State: logpb.BroadcastState_BROADCAST_PENDING})
	}
	s.alloc.nextID = MaxPendingBroadcasts + 1
	if err := s.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	full, rs, err := s.ApplyCommands(s.AppliedIndex()+1, createB("Y"))
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, rs[0], rejected(logpb.RejectCode_REJECT_EXHAUSTED), "65536 broadcasts pending")
	if full.NextID() != s.NextID() || len(full.PendingBroadcasts()) != MaxPendingBroadcasts {
		t.Fatal("a refused create changed the state")
	}
	// A duplicate of an existing key still answers (it creates nothing).
	s.bc.put(&logpb.BroadcastTask{Id: 7, MessageType: "X", Vchannels: []string{cch}, IdempotencyKey: "cluster/0/1:k", State: logpb.BroadcastState_BROADCAST_PENDING})
	_, rs, err = s.ApplyCommands(s.AppliedIndex()+1, createB("X", withIK("cluster/0/1:k")))
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, rs[0], createdResult(7, true), "")
	// Tombstoning one frees a slot; tombstones do not count.
	freed, rs, err := s.ApplyCommands(s.AppliedIndex()+1, abandonB(1, "make room"), createB("Y"), createB("Z"))
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, rs[1], createdResult(MaxPendingBroadcasts+1, false), "")
	checkResult(t, rs[2], rejected(logpb.RejectCode_REJECT_EXHAUSTED), "")
	if err := freed.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// ---- idempotency (docs/semantics.md#idempotency-keys) ------------------------------

func TestCreateBroadcastIdempotency(t *testing.T) {
	key := scopedKey(t)(vocab.DatabaseScopedKey(1, "retry-7"))
	collKey := scopedKey(t)(vocab.CollectionScopedKey(1, "retry-7"))
	s := build(t, base()...)

	step := func(c commands.Command, want *logpb.Result) (before, after *State) {
		t.Helper()
		before = s
		var rs []*logpb.Result
		s, rs = mustApply(t, s, c)
		checkResult(t, rs[0], want, "")
		return before, s
	}
	step(createB("CreateIndex", withIK(key), withTargets(cch, v15)), createdResult(1, false))
	if task, ok := s.BroadcastByIdempotencyKey("CreateIndex", key); !ok || task.Id != 1 {
		t.Fatalf("index lookup: %v, %v", task, ok)
	}

	// The same scope returns the first task and creates nothing, whatever
	// else the request says.
	b, a := step(createB("CreateIndex", withIK(key), withTargets(cch, v15)), createdResult(1, true))
	sameExceptApplied(t, b, a)
	b, a = step(createB("CreateIndex", withIK(key), withTargets(cch, p2, p3), withPayload([]byte("other"))), createdResult(1, true))
	sameExceptApplied(t, b, a)
	b, a = step(createB("CreateIndex", withIK(key), withTargets(p1)), createdResult(1, true)) // would be refused without the key hit
	sameExceptApplied(t, b, a)

	// Another message type, or another scope, with the same client key is
	// another task.
	step(createB("DropIndex", withIK(key)), createdResult(2, false))
	step(createB("CreateIndex", withIK(collKey)), createdResult(3, false))
	step(createB("CreateIndex"), createdResult(4, false))
	step(createB("CreateIndex"), createdResult(5, false)) // no key: never deduplicated
	if n := len(s.BroadcastTasks()); n != 5 {
		t.Fatalf("%d tasks, want 5", n)
	}

	// Still a hit after the task is tombstoned: by completion...
	step(ackAll(1, cch, v15), numberResult(2))
	step(completeB(1), completionResult(true, ""))
	b, a = step(createB("CreateIndex", withIK(key)), createdResult(1, true))
	sameExceptApplied(t, b, a)
	// ...or by abandonment.
	step(abandonB(2, "operator"), okResult())
	b, a = step(createB("DropIndex", withIK(key)), createdResult(2, true))
	sameExceptApplied(t, b, a)

	// Pruning the tombstones ends the window: the next request is new.
	step(pruneB(0, 1), numberResult(2))
	if _, ok := s.BroadcastByIdempotencyKey("CreateIndex", key); ok {
		t.Fatal("a pruned task is still indexed")
	}
	step(createB("CreateIndex", withIK(key)), createdResult(6, false))
	step(createB("DropIndex", withIK(key)), createdResult(7, false))
	step(createB("CreateIndex", withIK(key)), createdResult(6, true))
	// The collection-scoped task was never tombstoned, so it was kept.
	step(createB("CreateIndex", withIK(collKey)), createdResult(3, true))
}

// TestRefusedCreateRegistersNoKey: a create that is refused leaves no
// index entry, so a corrected retry with the same key creates the task.
func TestRefusedCreateRegistersNoKey(t *testing.T) {
	key := scopedKey(t)(vocab.ClusterScopedKey("k"))
	s := build(t, base()...)
	for _, c := range []commands.Command{
		createB("X", withIK(key), withTargets(v15)),                                        // no cchannel
		createB("X", withIK(key), withTargets(cch, "dml_9")),                               // unknown pchannel
		createB(vocab.MsgCreateCollection, withIK(key), withPayload([]byte{0xff})),         // bad payload
		cmd(bcBody("X", withIK(key)), withTerm(1)),                                         // stale leader
		createB("X", withIK(key), withRK(rk(logpb.ResourceDomain_RK_UNKNOWN, "x", false))), // invalid shape
	} {
		var rs []*logpb.Result
		next, rs := mustApply(t, s, c)
		if rs[0].Rejection == nil {
			t.Fatalf("%v accepted: %v", c.Body, rs[0])
		}
		sameExceptApplied(t, s, next)
		s = next
	}
	_, rs := mustApply(t, s, createB("X", withIK(key)))
	checkResult(t, rs[0], createdResult(1, false), "")
}

// ---- AckBroadcast ----------------------------------------------------------------

func TestApplyAckBroadcast(t *testing.T) {
	// Task 1 targets the cchannel and two vchannels.
	setup := func(more ...commands.Command) []commands.Command {
		return base(append([]commands.Command{createB("CreateIndex", withTargets(v25, cch, v15))}, more...)...)
	}
	first := cpt(cch, 2, 10, 100)
	wantAcked := func(id uint64, cps ...*logpb.VChannelCheckpoint) checkFn {
		return wantTask(id, func(t *testing.T, task *logpb.BroadcastTask) {
			t.Helper()
			if len(task.Acked) != len(cps) {
				t.Fatalf("acked %v, want %v", task.Acked, cps)
			}
			for i := range cps {
				if !proto.Equal(task.Acked[i], cps[i]) {
					t.Fatalf("acked %v, want %v", task.Acked, cps)
				}
			}
		})
	}
	runApplyCases(t, []applyCase{
		{
			name:  "records checkpoints, sorted by vchannel",
			setup: setup(),
			cmd:   ackB(1, cpt(v25, 1, 3, 300), first),
			want:  numberResult(2),
			check: all(wantAcked(1, first, cpt(v25, 1, 3, 300)), wantState(1, logpb.BroadcastState_BROADCAST_PENDING), channelsUnchanged),
		},
		{
			name:      "the first checkpoint wins; a re-ack is a no-op",
			setup:     setup(ackB(1, first)),
			cmd:       ackB(1, cpt(cch, 3, 99, 999)),
			want:      numberResult(0),
			unchanged: true,
			check:     wantAcked(1, first),
		},
		{
			name:      "an identical re-ack is a no-op",
			setup:     setup(ackB(1, first)),
			cmd:       ackB(1, first),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "only new vchannels are recorded",
			setup: setup(ackB(1, first)),
			cmd:   ackB(1, cpt(cch, 3, 99, 999), cpt(v15, 1, 1, 150)),
			want:  numberResult(1),
			check: wantAcked(1, first, cpt(v15, 1, 1, 150)),
		},
		{
			name:  "the same vchannel twice in one ack: the first wins",
			setup: setup(),
			cmd:   ackB(1, cpt(v15, 1, 1, 150), cpt(v15, 2, 2, 250)),
			want:  numberResult(1),
			check: wantAcked(1, cpt(v15, 1, 1, 150)),
		},
		{
			name:      "a vchannel that is not a target is ignored",
			setup:     setup(),
			cmd:       ackB(1, cpt(v16, 1, 1, 150), cpt(p1, 1, 1, 1)),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "targets are acked, non-targets in the same ack ignored",
			setup: setup(),
			cmd:   ackB(1, cpt(v16, 1, 1, 150), cpt(v25, 1, 1, 1)),
			want:  numberResult(1),
			check: wantAcked(1, cpt(v25, 1, 1, 1)),
		},
		{
			name:      "an unknown task is a no-op",
			setup:     setup(),
			cmd:       ackB(9, first),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:      "a tombstoned task is a no-op",
			setup:     setup(ackB(1, cpt(v15, 1, 1, 1)), abandonB(1, "operator")),
			cmd:       ackB(1, first),
			want:      numberResult(0),
			unchanged: true,
			check:     wantAcked(1, cpt(v15, 1, 1, 1)),
		},
		{
			name:      "a pruned task is a no-op",
			setup:     setup(abandonB(1, "operator"), pruneB(0, 1)),
			cmd:       ackB(1, first),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "acking everything does not complete the task",
			setup: setup(),
			cmd:   ackAll(1, cch, v15, v25),
			want:  numberResult(3),
			check: all(wantState(1, logpb.BroadcastState_BROADCAST_PENDING), func(t *testing.T, _, after *State) {
				if !AllAcked(mustTask(t, after, 1)) {
					t.Fatal("AllAcked is false")
				}
			}),
		},
	})
}

// ---- CompleteBroadcast -----------------------------------------------------------

func TestApplyCompleteBroadcast(t *testing.T) {
	// setupTask creates task 1 of msgType with payload to the targets and
	// acks all of them (unless ack is false).
	setupTask := func(msgType string, payload []byte, ack bool, targets []string, more ...commands.Command) []commands.Command {
		cs := []commands.Command{createB(msgType, withPayload(payload), withTargets(targets...))}
		if ack {
			cs = append(cs, ackAll(1, targets...))
		}
		return base(append(cs, more...)...)
	}
	tombstoned := func(id uint64, at int64) checkFn {
		return wantTask(id, func(t *testing.T, task *logpb.BroadcastTask) {
			t.Helper()
			if task.State != logpb.BroadcastState_BROADCAST_TOMBSTONE || task.TombstonedMs != at || task.TombstoneSeq == 0 ||
				task.AbandonedReason != "" || len(task.Payload) != 0 {
				t.Fatalf("task %v, want a completed tombstone at %d without its payload", task, at)
			}
		})
	}
	tombstonesOnly := func(t *testing.T, before, after *State) {
		t.Helper()
		if after.TombstoneCount() != before.TombstoneCount()+1 {
			t.Fatalf("tombstones %d -> %d", before.TombstoneCount(), after.TombstoneCount())
		}
	}
	createColl := createCollPayload(t, 5, 2)
	targets := []string{cch, v15, v25}
	runApplyCases(t, []applyCase{
		{
			name:    "no target acked",
			setup:   setupTask("CreateIndex", nil, false, targets),
			cmd:     completeB(1),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "0 of 3 targets acked",
		},
		{
			name:    "refused until every target is acked",
			setup:   setupTask("CreateIndex", nil, false, targets, ackB(1, cpt(cch, 1, 1, 1), cpt(v25, 1, 1, 1))),
			cmd:     completeB(1),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "2 of 3 targets acked",
		},
		{
			name:    "unknown task",
			setup:   base(),
			cmd:     completeB(3),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "broadcast 3 does not exist",
		},
		{
			name:  "a type without a callback is tombstoned and nothing else changes",
			setup: setupTask("CreateIndex", []byte{0xff}, true, targets),
			cmd:   completeB(1, withProposedAt(777)),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 777), channelsUnchanged, tombstonesOnly),
		},
		{
			name:      "a repeat on a tombstone is a no-op success",
			setup:     setupTask("CreateIndex", nil, true, targets, completeB(1)),
			cmd:       completeB(1),
			want:      completionResult(true, ""),
			unchanged: true,
		},
		{
			name:      "a repeat on an abandoned task is a no-op success",
			setup:     setupTask("CreateIndex", nil, false, targets, abandonB(1, "operator")),
			cmd:       completeB(1),
			want:      completionResult(true, ""),
			unchanged: true,
		},
		{
			name:    "a pruned task is not found",
			setup:   setupTask("CreateIndex", nil, true, targets, completeB(1), pruneB(0, 1)),
			cmd:     completeB(1),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "does not exist",
		},
		{
			name:  "CreateCollection allocates the collection's vchannels",
			setup: setupTask(vocab.MsgCreateCollection, createColl, true, targets),
			cmd:   completeB(1, withProposedAt(5)),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 5), wantCollection(5, v15, v25), bumped(1), func(t *testing.T, _, after *State) {
				if after.VChannelCount(p1) != 1 || after.VChannelCount(p2) != 1 || after.VChannelCount(p0) != 0 {
					t.Fatalf("vchannel counts p0..p2 %d %d %d, want 0 1 1", after.VChannelCount(p0), after.VChannelCount(p1), after.VChannelCount(p2))
				}
			}),
		},
		{
			name: "CreateCollection is idempotent when the vchannels exist",
			setup: base(allocV(5, 2), createB(vocab.MsgCreateCollection, withPayload(createColl), withTargets(append([]string{cch}, vnames(5, p0, p1)...)...)),
				ackAll(1, append([]string{cch}, vnames(5, p0, p1)...)...)),
			cmd:   completeB(1),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 0), channelsUnchanged, wantCollection(5, vocab.VChannelName(p0, 5, 0), vocab.VChannelName(p1, 5, 1))),
		},
		{
			name:  "DropCollection drops the collection's vchannels",
			setup: setupTask(vocab.MsgDropCollection, dropCollPayload(t, 5), true, targets, allocV(5, 2)),
			cmd:   completeB(1),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 0), wantCollection(5), bumped(1), func(t *testing.T, _, after *State) {
				if after.VChannelCount(p0)+after.VChannelCount(p1) != 0 {
					t.Fatal("vchannel counts not released")
				}
			}),
		},
		{
			name:  "DropCollection of an absent collection is a no-op callback",
			setup: setupTask(vocab.MsgDropCollection, dropCollPayload(t, 5), true, targets, allocV(6, 1)),
			cmd:   completeB(1),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 0), channelsUnchanged, wantCollection(6, vocab.VChannelName(p0, 6, 0))),
		},
		{
			name: "AlterReplicateConfig installs the configuration",
			setup: base(createB(vocab.MsgAlterReplicateConfig, withPayload(mustMarshal(t, fourFour())), withRK(exclusiveCluster), withTargets(cch, p1, p2, p3)),
				ackAll(1, cch, p1, p2, p3)),
			cmd:   completeB(1),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 0), bumped(1), wantConfig(fourFour().Clusters, fourFour().Topology...)),
		},
		{
			name:  "FlushAll records the highest time tick per pchannel",
			setup: base(createB(vocab.MsgFlushAll, withTargets(cch, v15, v16, p2)), ackB(1, cpt(cch, 1, 1, 100), cpt(v15, 1, 1, 300), cpt(v16, 4, 1, 200), cpt(p2, 1, 1, 150))),
			cmd:   completeB(1),
			want:  completionResult(true, ""),
			check: all(tombstoned(1, 0), channelsUnchanged, func(t *testing.T, before, after *State) {
				id, ticks := after.FlushAllTicks()
				want := []*logpb.PChannelTimeTick{{Pchannel: p0, TimeTick: 100}, {Pchannel: p1, TimeTick: 300}, {Pchannel: p2, TimeTick: 150}}
				if id != 1 || len(ticks) != len(want) {
					t.Fatalf("flush all %d %v, want 1 %v", id, ticks, want)
				}
				for i := range want {
					if !proto.Equal(ticks[i], want[i]) {
						t.Fatalf("flush all ticks %v, want %v", ticks, want)
					}
				}
				if bid, bt := before.FlushAllTicks(); bid != 0 || bt != nil {
					t.Fatal("the previous state saw the flush-all ticks")
				}
			}),
		},
		{
			name:  "a later FlushAll replaces the ticks",
			setup: base(createB(vocab.MsgFlushAll, withTargets(cch, p1)), ackB(1, cpt(cch, 1, 1, 100), cpt(p1, 1, 1, 100)), completeB(1), createB(vocab.MsgFlushAll), ackB(2, cpt(cch, 1, 2, 500))),
			cmd:   completeB(2),
			want:  completionResult(true, ""),
			check: func(t *testing.T, _, after *State) {
				id, ticks := after.FlushAllTicks()
				if id != 2 || len(ticks) != 1 || ticks[0].Pchannel != p0 || ticks[0].TimeTick != 500 {
					t.Fatalf("flush all %d %v", id, ticks)
				}
			},
		},
	})
}

// completeWith is a CompleteBroadcast carrying the leader's last FastAck
// checkpoints (body version 2).
func completeWith(id uint64, cps ...*logpb.VChannelCheckpoint) commands.Command {
	return cmd(&logpb.CompleteBroadcast{BroadcastId: id, Checkpoints: cps})
}

// TestCompleteBroadcastWithCheckpoints: a completion that carries the last
// acks records them and completes in the same command, exactly as an ack
// followed by a completion would; checkpoints that leave a target
// unacked, or that come for a task its nodes ack, refuse the whole command
// and record nothing.
func TestCompleteBroadcastWithCheckpoints(t *testing.T) {
	targets := []string{cch, v15, v25}
	create := createB("CreateIndex", withTargets(targets...))
	acked := func(n int) checkFn {
		return wantTask(1, func(t *testing.T, task *logpb.BroadcastTask) {
			t.Helper()
			if len(task.Acked) != n {
				t.Fatalf("task %v: %d acks, want %d", task, len(task.Acked), n)
			}
		})
	}
	runApplyCases(t, []applyCase{
		{
			name:  "the last acks complete the task in one command",
			setup: base(create, ackB(1, cpt(cch, 1, 1, 1))),
			cmd:   completeWith(1, cpt(v15, 1, 2, 2), cpt(v25, 1, 3, 3)),
			want:  completionResult(true, ""),
			check: all(acked(3), wantState(1, logpb.BroadcastState_BROADCAST_TOMBSTONE), func(t *testing.T, _, after *State) {
				task := mustTask(t, after, 1)
				if cp, ok := Acked(task, v25); !ok || cp.Offset != 3 || cp.TimeTick != 3 {
					t.Fatalf("v25's checkpoint %v, want the completion's", cp)
				}
			}),
		},
		{
			name:  "every ack in the completion",
			setup: base(create),
			cmd:   completeWith(1, cpt(cch, 1, 1, 1), cpt(v15, 1, 2, 2), cpt(v25, 1, 3, 3)),
			want:  completionResult(true, ""),
			check: all(acked(3), wantState(1, logpb.BroadcastState_BROADCAST_TOMBSTONE)),
		},
		{
			name:    "checkpoints that leave a target unacked record nothing",
			setup:   base(create, ackB(1, cpt(cch, 1, 1, 1))),
			cmd:     completeWith(1, cpt(v15, 1, 2, 2)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "1 of 3 targets acked",
		},
		{
			name:    "checkpoints of non-targets do not count",
			setup:   base(create, ackB(1, cpt(cch, 1, 1, 1), cpt(v15, 1, 2, 2))),
			cmd:     completeWith(1, cpt(v16, 1, 3, 3)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "2 of 3 targets acked",
		},
		{
			name:    "an ack_sync_up task is acked by its nodes, not by a completion",
			setup:   base(cmd(bcBody("CreateIndex", withTargets(targets...), func(b *logpb.CreateBroadcast) { b.AckSyncUp = true }))),
			cmd:     completeWith(1, cpt(cch, 1, 1, 1), cpt(v15, 1, 2, 2), cpt(v25, 1, 3, 3)),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "ack_sync_up",
		},
		{
			name:  "an earlier ack wins over the completion's checkpoint",
			setup: base(create, ackB(1, cpt(cch, 1, 1, 1), cpt(v15, 1, 2, 2))),
			cmd:   completeWith(1, cpt(v15, 1, 9, 9), cpt(v25, 1, 3, 3)),
			want:  completionResult(true, ""),
			check: all(acked(3), func(t *testing.T, _, after *State) {
				if cp, _ := Acked(mustTask(t, after, 1), v15); cp.Offset != 2 {
					t.Fatalf("v15's checkpoint %v, want the first ack's", cp)
				}
			}),
		},
		{
			name:      "on a tombstone the checkpoints are ignored",
			setup:     base(create, ackAll(1, targets...), completeB(1)),
			cmd:       completeWith(1, cpt(v15, 1, 9, 9)),
			want:      completionResult(true, ""),
			unchanged: true,
		},
	})
}

// TestCompleteWithCheckpointsKeepsThemWhenTheCallbackRefuses: the acks are
// facts (the messages are in the WALs), so a refused callback leaves them
// recorded with the task still PENDING; the retry needs no append.
func TestCompleteWithCheckpointsKeepsThemWhenTheCallbackRefuses(t *testing.T) {
	targets := append([]string{cch}, vnames(5, p0, p1, p2)...)
	s := build(t, base(createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 3)), withTargets(targets...)), allocV(5, 2))...)
	var cps []*logpb.VChannelCheckpoint
	for i, v := range targets {
		cps = append(cps, cpt(v, 1, uint64(i), 100+uint64(i)))
	}
	next, rs := mustApply(t, s, completeWith(1, cps...))
	if c := rs[0].GetCompletion(); c == nil || c.Tombstoned || !strings.Contains(c.CallbackError, "but its CreateCollection went to") {
		t.Fatalf("result %v, want the callback's refusal", rs[0])
	}
	task := mustTask(t, next, 1)
	if task.State != logpb.BroadcastState_BROADCAST_PENDING || len(task.Acked) != len(targets) || task.CallbackAttempts != 1 {
		t.Fatalf("task %v, want pending with every ack and one attempt", task)
	}
	next, rs = mustApply(t, next, dropV(5), completeB(1))
	checkResult(t, rs[1], completionResult(true, ""), "")
	if mustTask(t, next, 1).State != logpb.BroadcastState_BROADCAST_TOMBSTONE {
		t.Fatal("the retry did not complete the task")
	}
}

// TestCompleteBroadcastCallbackRefusal: a callback that refuses leaves the
// task PENDING with the attempt counted and the error recorded, and
// nothing else changed; the retry after the cause is fixed succeeds.
// Creation refuses every task whose callback is doomed on the state it
// sees, so these refusals come from commands outside the broadcaster
// (which take no resource keys) applied between creation and completion.
func TestCompleteBroadcastCallbackRefusal(t *testing.T) {
	tests := []struct {
		name    string
		create  commands.Command   // task 1
		before  []commands.Command // applied after create + ack, before the first Complete
		errMsg  string
		fix     []commands.Command // makes the callback succeed
		check   checkFn            // after the successful retry
		targets []string
	}{
		{
			name: "AlterReplicateConfig after a direct configuration change",
			create: createB(vocab.MsgAlterReplicateConfig, withPayload(shrinkConfig(t)), withRK(exclusiveCluster),
				withTargets(cch, p1, p2, p3)),
			targets: []string{cch, p1, p2, p3},
			before:  []commands.Command{replicate(fourFour().Clusters, fourFour().Topology...)},
			errMsg:  "may only be extended by appending",
		},
		{
			name: "CreateCollection after a direct allocation with another shard count",
			create: createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 3)),
				withTargets(append([]string{cch}, vnames(5, p0, p1, p2)...)...)),
			targets: append([]string{cch}, vnames(5, p0, p1, p2)...),
			before:  []commands.Command{allocV(5, 2)},
			errMsg:  "but its CreateCollection went to",
			fix:     []commands.Command{dropV(5)},
			check:   wantCollection(5, vnames(5, p0, p1, p2)...),
		},
		{
			name: "CreateCollection after a direct allocation on other pchannels",
			create: createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 2)),
				withTargets(cch, v15, v25)),
			targets: []string{cch, v15, v25},
			before:  []commands.Command{allocV(5, 2)},
			errMsg:  "but its CreateCollection went to",
			fix:     []commands.Command{dropV(5)},
			check:   wantCollection(5, v15, v25),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := build(t, base(tt.create, ackAll(1, tt.targets...))...)
			for _, c := range tt.before {
				s, _ = mustApply(t, s, c)
			}
			for attempt := uint32(1); attempt <= 2; attempt++ {
				at := int64(1000 * attempt)
				next, rs := mustApply(t, s, completeB(1, withProposedAt(at)))
				got := rs[0].GetCompletion()
				if rs[0].Rejection != nil || got == nil || got.Tombstoned || !strings.Contains(got.CallbackError, tt.errMsg) {
					t.Fatalf("attempt %d: result %v, want a refusal containing %q", attempt, rs[0], tt.errMsg)
				}
				want := proto.Clone(mustTask(t, s, 1)).(*logpb.BroadcastTask)
				want.CallbackAttempts, want.LastError, want.LastErrorMs = attempt, got.CallbackError, at
				sameExceptTask(t, s, next, want)
				if want.State != logpb.BroadcastState_BROADCAST_PENDING {
					t.Fatalf("refused task is %s", want.State)
				}
				s = next
			}
			if tt.fix == nil {
				// An operator gives up; the callback still never runs.
				next, rs := mustApply(t, s, abandonB(1, "callback keeps failing"))
				checkResult(t, rs[0], okResult(), "")
				channelsUnchanged(t, s, next)
				return
			}
			for _, c := range tt.fix {
				s, _ = mustApply(t, s, c)
			}
			next, rs := mustApply(t, s, completeB(1, withProposedAt(9000)))
			checkResult(t, rs[0], completionResult(true, ""), "")
			task := mustTask(t, next, 1)
			if task.State != logpb.BroadcastState_BROADCAST_TOMBSTONE || task.CallbackAttempts != 2 || task.LastError == "" {
				t.Fatalf("after the retry: %v (the failure record is kept for the operator)", task)
			}
			tt.check(t, s, next)
		})
	}
}

// TestCompleteBroadcastUnknownTypeRunsNoCallback: a message type with the
// name of nothing registered is tombstoned without touching anything, even
// if its payload looks like a built-in one.
func TestCompleteBroadcastUnknownTypeRunsNoCallback(t *testing.T) {
	s := build(t, base(createB("CreateCollectionV2", withPayload(createCollPayload(t, 5, 1))), ackAll(1, cch))...)
	next, rs := mustApply(t, s, completeB(1))
	checkResult(t, rs[0], completionResult(true, ""), "")
	channelsUnchanged(t, s, next)
	if _, ok := next.Collection(5); ok {
		t.Fatal("a callback ran for an unregistered message type")
	}
}

// ---- AbandonBroadcast ------------------------------------------------------------

func TestApplyAbandonBroadcast(t *testing.T) {
	createColl := createB(vocab.MsgCreateCollection, withPayload(createCollPayload(t, 5, 1)), withTargets(cch, v15))
	runApplyCases(t, []applyCase{
		{
			name:  "a pending task becomes a tombstone with the reason",
			setup: base(createColl, ackB(1, cpt(cch, 1, 1, 1))),
			cmd:   abandonB(1, "stuck since Tuesday", withProposedAt(31)),
			want:  okResult(),
			check: all(channelsUnchanged, wantTask(1, func(t *testing.T, task *logpb.BroadcastTask) {
				if task.State != logpb.BroadcastState_BROADCAST_TOMBSTONE || task.AbandonedReason != "stuck since Tuesday" ||
					task.TombstonedMs != 31 || task.TombstoneSeq != 1 || len(task.Acked) != 1 {
					t.Fatalf("task %v", task)
				}
			})),
		},
		{
			name:  "a fully acked task is abandoned without running its callback",
			setup: base(createColl, ackAll(1, cch, v15)),
			cmd:   abandonB(1, "operator"),
			want:  okResult(),
			check: all(channelsUnchanged, wantCollection(5), wantState(1, logpb.BroadcastState_BROADCAST_TOMBSTONE)),
		},
		{
			name:    "a tombstone cannot be abandoned",
			setup:   base(createColl, ackAll(1, cch, v15), completeB(1)),
			cmd:     abandonB(1, "operator"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already finished",
		},
		{
			name:    "an abandoned task cannot be abandoned again",
			setup:   base(createColl, abandonB(1, "first")),
			cmd:     abandonB(1, "second"),
			want:    rejected(logpb.RejectCode_REJECT_CONFLICT),
			wantMsg: "already finished",
		},
		{
			name:    "unknown task",
			setup:   base(),
			cmd:     abandonB(1, "operator"),
			want:    rejected(logpb.RejectCode_REJECT_NOT_FOUND),
			wantMsg: "broadcast 1 does not exist",
		},
		{
			name:    "a reason is required",
			setup:   base(createColl),
			cmd:     abandonB(1, ""),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "needs a reason",
		},
	})
}

// ---- PruneBroadcastTombstones ------------------------------------------------------

// tombstoneIDs lists the tombstoned task IDs in tombstone order.
func tombstoneIDs(s *State) []uint64 {
	var out []uint64
	for it := s.bc.tombstones.Iterator(); !it.Done(); {
		_, id, _ := it.Next()
		out = append(out, id)
	}
	return out
}

func wantTombstones(ids ...uint64) checkFn {
	return func(t *testing.T, _, after *State) {
		t.Helper()
		if got := tombstoneIDs(after); fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("tombstones (oldest first) %v, want %v", got, ids)
		}
		if after.TombstoneCount() != len(ids) {
			t.Fatalf("TombstoneCount %d, want %d", after.TombstoneCount(), len(ids))
		}
	}
}

func TestApplyPruneBroadcastTombstones(t *testing.T) {
	key := func(i int) string { return scopedKey(t)(vocab.ClusterScopedKey(fmt.Sprint("k", i))) }
	// Tasks 1..5 with keys; 3, 1, 4 and 2 tombstoned in that order at times
	// 1000, 2000, 3000 and 4000; task 5 stays pending (created at 0).
	fixture := func(more ...commands.Command) []commands.Command {
		cs := []commands.Command{}
		for i := 1; i <= 5; i++ {
			cs = append(cs, createB("X", withIK(key(i))))
		}
		cs = append(cs,
			abandonB(3, "a", withProposedAt(1000)),
			ackAll(1, cch), completeB(1, withProposedAt(2000)),
			abandonB(4, "b", withProposedAt(3000)),
			ackAll(2, cch), completeB(2, withProposedAt(4000)),
		)
		return base(append(cs, more...)...)
	}
	indexed := func(ids ...int) checkFn {
		return func(t *testing.T, _, after *State) {
			t.Helper()
			for i := 1; i <= 5; i++ {
				task, ok := after.BroadcastByIdempotencyKey("X", key(i))
				want := false
				for _, id := range ids {
					want = want || id == i
				}
				if ok != want || ok && task.Id != uint64(i) {
					t.Fatalf("key %d: indexed=%v (task %v), want %v", i, ok, task, want)
				}
			}
		}
	}
	const day = 86_400_000
	runApplyCases(t, []applyCase{
		{
			name:  "fixture",
			setup: fixture(),
			cmd:   pruneB(10, day, withProposedAt(5000)),
			want:  numberResult(0), unchanged: true,
			check: all(wantTombstones(3, 1, 4, 2), indexed(1, 2, 3, 4, 5)),
		},
		{
			name:  "by count, oldest tombstone first (not lowest id)",
			setup: fixture(),
			cmd:   pruneB(2, day, withProposedAt(5000)),
			want:  numberResult(2),
			check: all(wantTombstones(4, 2), wantNoTask(3), wantNoTask(1), indexed(2, 4, 5), wantState(5, logpb.BroadcastState_BROADCAST_PENDING)),
		},
		{
			name:  "max count 0 drops every tombstone and no pending task",
			setup: fixture(),
			cmd:   pruneB(0, day, withProposedAt(5000)),
			want:  numberResult(4),
			check: all(wantTombstones(), wantTaskCount(1), indexed(5), wantState(5, logpb.BroadcastState_BROADCAST_PENDING)),
		},
		{
			name:  "by age: tombstoned at or before now - lifetime",
			setup: fixture(),
			cmd:   pruneB(10, 3000, withProposedAt(5000)), // cutoff 2000
			want:  numberResult(2),
			check: all(wantTombstones(4, 2), indexed(2, 4, 5)),
		},
		{
			name:      "by age: one millisecond short of the cutoff keeps it",
			setup:     fixture(),
			cmd:       pruneB(10, 3000, withProposedAt(3999)), // cutoff 999
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:  "by age: exactly at the cutoff is dropped",
			setup: fixture(),
			cmd:   pruneB(10, 3000, withProposedAt(4000)), // cutoff 1000
			want:  numberResult(1),
			check: wantTombstones(1, 4, 2),
		},
		{
			name:  "count and age together",
			setup: fixture(),
			cmd:   pruneB(3, 4500, withProposedAt(5000)), // count drops 3; age drops nothing more (cutoff 500)
			want:  numberResult(1),
			check: wantTombstones(1, 4, 2),
		},
		{
			name:  "age uses replicated time, not creation time",
			setup: fixture(),
			cmd:   pruneB(10, 1, withProposedAt(1500)), // cutoff 1499: only 3 (tombstoned at 1000) is old; 5 was created at 0 but is pending
			want:  numberResult(1),
			check: all(wantTombstones(1, 4, 2), wantState(5, logpb.BroadcastState_BROADCAST_PENDING)),
		},
		{
			name: "stops at the first survivor in tombstone order",
			// Task 6 tombstoned last but with an older clock (replicated
			// time is the proposer's): it waits behind the younger ones.
			setup: fixture(createB("X"), abandonB(6, "c", withProposedAt(10))),
			cmd:   pruneB(10, 3000, withProposedAt(5000)), // cutoff 2000
			want:  numberResult(2),
			check: wantTombstones(4, 2, 6),
		},
		{
			name:      "no tombstones",
			setup:     base(createB("X")),
			cmd:       pruneB(0, 1),
			want:      numberResult(0),
			unchanged: true,
		},
		{
			name:    "lifetime must be positive",
			setup:   fixture(),
			cmd:     pruneB(0, 0),
			want:    rejected(logpb.RejectCode_REJECT_INVALID),
			wantMsg: "lifetime must be positive",
		},
	})
}

// TestPruneBroadcastExtremeClock: a prune proposed at the far end of the
// clock range neither overflows into dropping young tombstones nor panics.
func TestPruneBroadcastExtremeClock(t *testing.T) {
	s := build(t, base(createB("X"), abandonB(1, "r", withProposedAt(100)))...)
	for _, at := range []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 100} {
		for _, lifetime := range []int64{1, 1000, math.MaxInt64} {
			_, rs := mustApply(t, s, pruneB(10, lifetime, withProposedAt(at)))
			if !proto.Equal(rs[0], numberResult(0)) {
				t.Fatalf("prune at %d with lifetime %d: %v, want nothing dropped", at, lifetime, rs[0])
			}
		}
	}
	// Far in the future, it is old.
	_, rs := mustApply(t, s, pruneB(10, 1, withProposedAt(math.MaxInt64)))
	checkResult(t, rs[0], numberResult(1), "")
}

// ---- snapshots ------------------------------------------------------------------------

// broadcastPopulated has pending tasks (some partly acked, one with a
// refused callback), completed and abandoned tombstones whose tombstone
// order differs from their ID order, idempotency keys on both, and
// flush-all ticks.
func broadcastPopulated(t *testing.T) *State {
	t.Helper()
	k := func(s string) string { return scopedKey(t)(vocab.CollectionScopedKey(5, s)) }
	return build(t, base(
		createB(vocab.MsgFlushAll, withTargets(cch, p1, p2), withIK(k("flush"))), // 1
		createB("CreateIndex", withTargets(cch, v15), withIK(k("idx")),
			withRK(rk(rkCollection, "db:c", false), rk(rkDB, "db", true))), // 2
		createB(vocab.MsgAlterReplicateConfig, withPayload(shrinkConfig(t)), withIK(k("alter")),
			withRK(exclusiveCluster), withTargets(cch, p1, p2, p3)), // 3
		createB("DropIndex", withIK(k("idx"))), // 4
		createB("CreateIndex"),                 // 5
		ackB(1, cpt(cch, 1, 1, 10), cpt(p1, 1, 1, 20), cpt(p2, 2, 1, 30)),
		ackB(2, cpt(v15, 1, 2, 40)),
		ackAll(3, cch, p1, p2, p3),
		replicate(fourFour().Clusters, fourFour().Topology...), // a direct change the pending task no longer extends
		completeB(3, withProposedAt(50)),                       // refused: stays pending
		abandonB(4, "operator", withProposedAt(60)),
		completeB(1, withProposedAt(70)),
		ackAll(5, cch),
	)...)
}

func TestBroadcastSnapshotRoundTrip(t *testing.T) {
	s := broadcastPopulated(t)
	if got := tombstoneIDs(s); fmt.Sprint(got) != "[4 1]" {
		t.Fatalf("fixture tombstones %v", got)
	}
	r := restore(t, s)
	if err := r.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	a, b := s.BroadcastTasks(), r.BroadcastTasks()
	if len(a) != len(b) || len(a) != 5 {
		t.Fatalf("%d tasks restored, want %d", len(b), len(a))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("task %d: %v, want %v", i, b[i], a[i])
		}
	}
	if fmt.Sprint(tombstoneIDs(r)) != fmt.Sprint(tombstoneIDs(s)) || r.TombstoneCount() != 2 || len(r.PendingBroadcasts()) != 3 {
		t.Fatalf("restored tombstones %v, pending %d", tombstoneIDs(r), len(r.PendingBroadcasts()))
	}
	if id, ticks := r.FlushAllTicks(); id != 1 || len(ticks) != 3 {
		t.Fatalf("restored flush-all %d %v", id, ticks)
	}
	k := func(s string) string { return scopedKey(t)(vocab.CollectionScopedKey(5, s)) }
	for _, q := range []struct {
		msgType, key string
		id           uint64
	}{{vocab.MsgFlushAll, k("flush"), 1}, {"CreateIndex", k("idx"), 2}, {vocab.MsgAlterReplicateConfig, k("alter"), 3}, {"DropIndex", k("idx"), 4}} {
		if task, ok := r.BroadcastByIdempotencyKey(q.msgType, q.key); !ok || task.Id != q.id {
			t.Fatalf("restored index: %s %s -> %v, %v; want %d", q.msgType, q.key, task, ok, q.id)
		}
	}

	// The same log suffix gives the same results and states on both: a
	// duplicate create hits (a tombstone and a pending task), new creates
	// take the same IDs, pruning drops in the same (tombstone) order, and
	// tombstone sequence numbers continue where they were.
	suffix := [][]commands.Command{
		{createB("DropIndex", withIK(k("idx"))), createB("CreateIndex", withIK(k("idx"))), createB(vocab.MsgFlushAll, withIK(k("flush")))},
		{createB("New", withIK(k("new")))},
		{ackAll(2, cch), completeB(2, withProposedAt(80))},
		{abandonB(3, "give up", withProposedAt(90))},
		{pruneB(2, 1_000_000, withProposedAt(100))},
		{createB("DropIndex", withIK(k("idx"))), createB(vocab.MsgFlushAll, withIK(k("flush"))), createB("CreateIndex", withIK(k("idx")))},
		{completeB(5, withProposedAt(110)), pruneB(0, 1, withProposedAt(120))},
	}
	for i, entry := range suffix {
		var ra, rb []*logpb.Result
		s, ra = mustApply(t, s, entry...)
		r, rb = mustApply(t, r, entry...)
		for j := range ra {
			if !proto.Equal(ra[j], rb[j]) {
				t.Fatalf("entry %d command %d: original %v, restored %v", i, j, ra[j], rb[j])
			}
		}
		if i == 0 {
			checkResult(t, ra[0], createdResult(4, true), "")
			checkResult(t, ra[1], createdResult(2, true), "")
			checkResult(t, ra[2], createdResult(1, true), "")
		}
		if i == 4 {
			// Tombstones were 4, 1, 2, 3 (oldest first): 4 and 1 go.
			checkResult(t, ra[0], numberResult(2), "")
			if fmt.Sprint(tombstoneIDs(r)) != "[2 3]" {
				t.Fatalf("restored replica pruned to %v", tombstoneIDs(r))
			}
		}
		if i == 5 {
			checkResult(t, ra[0], createdResult(7, false), "")
			checkResult(t, ra[1], createdResult(8, false), "")
			checkResult(t, ra[2], createdResult(2, true), "")
		}
		if !bytes.Equal(snapshotBytes(t, s), snapshotBytes(t, r)) {
			t.Fatalf("after suffix entry %d the original and the restored replica differ", i)
		}
	}
}

func bcRecord(task *logpb.BroadcastTask) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_BroadcastTask{BroadcastTask: task}}
}

func bcMetaRecord(m *logpb.BroadcastMeta) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_BroadcastMeta{BroadcastMeta: m}}
}

// TestReadSnapshotRejectsBroadcast: snapshots whose broadcast records break
// an invariant are refused.
func TestReadSnapshotRejectsBroadcast(t *testing.T) {
	pending := func(id uint64, edit func(*logpb.BroadcastTask)) *logpb.SnapshotRecord {
		task := &logpb.BroadcastTask{Id: id, MessageType: "X", Vchannels: []string{cch, v15}, State: logpb.BroadcastState_BROADCAST_PENDING}
		if edit != nil {
			edit(task)
		}
		return bcRecord(task)
	}
	tomb := func(id, seq uint64, edit func(*logpb.BroadcastTask)) *logpb.SnapshotRecord {
		return pending(id, func(task *logpb.BroadcastTask) {
			task.State, task.TombstoneSeq, task.AbandonedReason = logpb.BroadcastState_BROADCAST_TOMBSTONE, seq, "r"
			if edit != nil {
				edit(task)
			}
		})
	}
	meta := bcMetaRecord(&logpb.BroadcastMeta{NextTombstoneSeq: 10})
	tests := []struct {
		name    string
		recs    []*logpb.SnapshotRecord
		wantMsg string
	}{
		{"id not below next id", []*logpb.SnapshotRecord{allocator(1, 5), pending(5, nil)}, "broadcast record 5"},
		{"id 0", []*logpb.SnapshotRecord{allocator(1, 5), pending(0, nil)}, "broadcast record 0"},
		{"state unknown", []*logpb.SnapshotRecord{allocator(1, 5), pending(1, func(task *logpb.BroadcastTask) { task.State = 0 })}, "in state"},
		{"ack of a non-target", []*logpb.SnapshotRecord{allocator(1, 5), pending(1, func(task *logpb.BroadcastTask) {
			task.Acked = []*logpb.VChannelCheckpoint{cpt(v16, 1, 1, 1)}
		})}, "not a target"},
		{"repeated ack", []*logpb.SnapshotRecord{allocator(1, 5), pending(1, func(task *logpb.BroadcastTask) {
			task.Acked = []*logpb.VChannelCheckpoint{cpt(v15, 1, 1, 1), cpt(v15, 1, 1, 1)}
		})}, "repeated"},
		{"completed without every ack", []*logpb.SnapshotRecord{allocator(1, 5), meta, tomb(1, 1, func(task *logpb.BroadcastTask) {
			task.AbandonedReason = ""
			task.Acked = []*logpb.VChannelCheckpoint{cpt(cch, 1, 1, 1)}
		})}, "completed with 1 of 2"},
		{"two tombstones at one sequence number", []*logpb.SnapshotRecord{allocator(1, 5), meta, tomb(1, 3, nil), tomb(2, 3, nil)}, "not indexed"},
		{"a tombstone at or past the next sequence number", []*logpb.SnapshotRecord{allocator(1, 5), meta, tomb(1, 10, nil)}, "tombstone sequence"},
		{"two tasks holding one idempotency scope", []*logpb.SnapshotRecord{allocator(1, 5),
			pending(1, func(task *logpb.BroadcastTask) { task.IdempotencyKey = "cluster/0/1:k" }),
			pending(2, func(task *logpb.BroadcastTask) { task.IdempotencyKey = "cluster/0/1:k" })}, "idempotency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := stream(t, append([]*logpb.SnapshotRecord{header(1, 1, uint64(len(tt.recs)))}, tt.recs...)...)
			s, err := ReadSnapshot(bytes.NewReader(data))
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) || s != nil {
				t.Fatalf("ReadSnapshot = %v, %v; want an error mentioning %q", s != nil, err, tt.wantMsg)
			}
		})
	}
}
