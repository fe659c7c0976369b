package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/allocator"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/controller/manifest"
	"github.com/coordd/coordd/controller/membership"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/vocab"
)

// The outcome table (docs/semantics.md#error-classes): a proposal whose
// fate raft cannot tell is an unknown outcome on every path to the client.
// Every proposing service is driven over a fake leader that, once armed,
// answers the next proposal with an unknown outcome and then no longer
// leads (as a deposed leader does: EstablishedTerm 0, every later
// proposal refused "not the leader"). Whatever the service does next — a
// retry, a re-check of its leadership, a rewrap — its answer must still
// wrap leadership.ErrOutcomeUnknown, and the API must mark it
// coordd-outcome: unknown.

// errLostAnswer is what the fake answers the armed proposal: raft's
// "leadership lost with the entry in flight", as the raft node reports it.
var errLostAnswer = fmt.Errorf("%w: leadership lost while committing", leadership.ErrOutcomeUnknown)

// lostLeader is a controllertest.Leader that loses its leadership at the
// armed proposal: applied (or not, see applied) and answered errLostAnswer.
type lostLeader struct {
	*controllertest.Leader
	armed atomic.Bool
	lost  atomic.Bool
	hits  atomic.Int32 // proposals answered errLostAnswer
}

// newLostLeader returns the fake leading term 3. With applied the armed
// proposal is applied before its answer is lost; otherwise it is answered
// before it applies (a timeout while it was queued).
func newLostLeader(t *testing.T, clock clockwork.Clock, applied bool) *lostLeader {
	l := &lostLeader{Leader: controllertest.NewLeader(t, clock, 3)}
	l.SetBeforePropose(func(proto.Message) error {
		if l.lost.Load() {
			return controllertest.ErrNotLeader // a deposed node's retries
		}
		if !applied && l.armed.Load() {
			return l.lose()
		}
		return nil
	})
	if applied {
		l.SetAfterApply(func(proto.Message) error {
			if l.armed.Load() && !l.lost.Load() {
				return l.lose()
			}
			return nil
		})
	}
	return l
}

func (l *lostLeader) lose() error {
	l.lost.Store(true)
	l.SetEstablished(0)
	l.hits.Add(1)
	return errLostAnswer
}

// LinearizableRead and IsLeader complete datapath.Leader.
func (l *lostLeader) LinearizableRead(context.Context) (*fsm.State, error) {
	if l.lost.Load() {
		return nil, controllertest.ErrNotLeader
	}
	return l.State(), nil
}

func (l *lostLeader) IsLeader() bool { return !l.lost.Load() }

// outcomeWorld is every proposing service over one lostLeader: streaming
// initialised with two PChannels held by one node, collection 7 with a
// VChannel on each and a growing segment, members n1 (this one, leading)
// and n2.
type outcomeWorld struct {
	l          *lostLeader
	node       uint64
	epoch      uint64
	pchTerm    int64
	vch        string
	segment    int64
	pending    uint64 // a pending broadcast task, when the row asked for one
	freeID     uint64 // reserved, not used: a new segment's ID
	tso        *allocator.TSO
	ids        *allocator.IDs
	flush      *flush.Manager
	broadcasts *broadcaster.Manager
	channels   *channels.Service
	data       *datapath.Service
	members    *membership.Service
	manifests  *manifest.Committer
}

func newOutcomeWorld(t *testing.T, applied, pendingTask bool) *outcomeWorld {
	t.Helper()
	clock := controllertest.NewClock()
	l := newLostLeader(t, clock, applied)
	w := &outcomeWorld{l: l}
	pchs := []string{vocab.PChannelName("oc-dml", 0), vocab.PChannelName("oc-dml", 1)}
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "oc", Pchannels: pchs})
	reg := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "127.0.0.1:9", Incarnation: "i"}).GetRegisterNode()
	w.node, w.epoch = reg.GetNodeId(), reg.GetEpoch()
	var as []*logpb.PChannelAssignment
	for _, pch := range pchs {
		p, _ := l.State().PChannel(pch)
		as = append(as, &logpb.PChannelAssignment{Pchannel: pch, NodeId: w.node, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: p.Term})
	}
	assigned := l.MustPropose(t, &logpb.AssignPChannels{Assignments: as}).GetAssign().GetAssigned()
	l.MustPropose(t, &logpb.AssignPChannelsDone{Channels: assigned})
	w.pchTerm = assigned[0].Term
	l.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: 7, Count: 2})
	coll, _ := l.State().Collection(7)
	w.vch = coll.Vchannels[0]
	w.segment = l.MustPropose(t, &logpb.CreateSegment{CollectionId: 7, PartitionId: 1, Vchannel: w.vch,
		NodeId: w.node, PchannelTerm: w.pchTerm}).GetSegments().GetIds()[0]
	l.MustPropose(t, &logpb.UpsertMember{Member: &logpb.Member{Id: "n2", RaftAddr: "127.0.0.1:7002"}})
	w.freeID = l.MustPropose(t, &logpb.ReserveIDs{Count: 10}).GetIdRange().GetFirst()
	if pendingTask {
		// A task the broadcaster recovers and keeps retrying (its appends
		// fail): it holds its keys, so only a row that needs it has it.
		w.pending = l.MustPropose(t, &logpb.CreateBroadcast{MessageType: "CreateIndex", Payload: []byte("idx"),
			ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "db:p"}},
			Vchannels:    []string{w.vch, l.State().CChannel()}}).GetBroadcast().GetBroadcastId()
	}

	w.tso = allocator.NewTSO(l, allocator.TSOConfig{Clock: clock})
	w.ids = allocator.NewIDs(l, 100)
	w.flush = flush.New(l, w.tso, clock, flush.Config{})
	bm, err := broadcaster.New(l, unusedAppender{}, broadcaster.Config{
		// The real clock: a create's retries back off on it.
		Clock: clockwork.NewRealClock(), BackoffInitial: time.Millisecond, BackoffMax: 5 * time.Millisecond,
		TombstoneCheckInterval: time.Hour, AckSyncUpResend: time.Hour,
		Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bm.Close)
	controllertest.RunRoutine(t, l, bm.Run, 3)
	w.broadcasts = bm
	w.channels = channels.New(l, nil, nil, nil)
	w.data = datapath.New(datapath.Deps{Leader: l, TSO: w.tso, Flush: w.flush, Revisions: anyRevision{},
		Broadcasts: bm, Sessions: lapsedSessions{}, Clock: clock})
	w.members = membership.New(&twoMembers{}, l, "n1")
	store, err := objectstore.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	w.manifests = manifest.New(l, manifest.Config{Store: store, Clock: clock, Logger: hclog.NewNullLogger()})
	return w
}

// unusedAppender fails every append: no task in these tests gets that far.
type unusedAppender struct{}

func (unusedAppender) Append(context.Context, broadcaster.NodeTarget, string, int64, []byte, uint64, bool, uint64) (*logpb.VChannelCheckpoint, error) {
	return nil, errors.New("outcome table: no append expected")
}

type anyRevision struct{}

func (anyRevision) CheckNamedRevision(context.Context, *fsm.State, int64, string) error { return nil }

// lapsedSessions has seen no heartbeat from any node.
type lapsedSessions struct{}

func (lapsedSessions) HeartbeatHeld(uint64, uint64, fsm.AssignmentVersion, map[string]int64, time.Duration) {
}
func (lapsedSessions) LastSeen(uint64) (time.Duration, bool) { return 0, false }
func (lapsedSessions) TTL() time.Duration                    { return time.Second }
func (lapsedSessions) SilentAfter(uint64) time.Duration      { return time.Second / 2 }

// twoMembers is a raft configuration of n1 (leading) and n2 whose changes
// always succeed: the unknown outcomes here come from the directory's
// proposals (raft's own answers are raftnode's, see
// raftnode/membership_outcome_test.go).
type twoMembers struct{}

func (*twoMembers) Configuration() ([]membership.Server, error) {
	return []membership.Server{{ID: "n1", RaftAddr: "127.0.0.1:7001", Voter: true},
		{ID: "n2", RaftAddr: "127.0.0.1:7002", Voter: true}}, nil
}
func (*twoMembers) AddVoter(string, string) error           { return nil }
func (*twoMembers) RemoveServer(string) error               { return nil }
func (*twoMembers) TransferLeadership(string, string) error { return nil }
func (*twoMembers) Leader() (string, string)                { return "n1", "127.0.0.1:7001" }
func (*twoMembers) ClusterID() string                       { return "oc" }

// outcomeRow is one call of a proposing service; pendingTask gives its
// world a pending broadcast task (outcomeWorld.pending).
type outcomeRow struct {
	name        string
	pendingTask bool
	call        func(ctx context.Context, w *outcomeWorld) error
}

// outcomeRows names every proposing service's calls and makes each once.
func outcomeRows() []outcomeRow {
	ts := fsm.ComposeTS(controllertest.Epoch.UnixMilli())
	type row = outcomeRow
	return []row{
		{"allocator TSO.Alloc", false, func(ctx context.Context, w *outcomeWorld) error {
			_, err := w.tso.Alloc(ctx, 1)
			return err
		}},
		{"allocator IDs.Alloc", false, func(ctx context.Context, w *outcomeWorld) error {
			_, err := w.ids.Alloc(ctx, 1)
			return err
		}},
		{"broadcaster Broadcast", false, func(ctx context.Context, w *outcomeWorld) error {
			c, err := broadcaster.Check(broadcaster.Request{MessageType: "CreateIndex", Payload: []byte("idx"),
				ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "db:c"}},
				VChannels:    []string{w.vch}})
			if err != nil {
				return err
			}
			_, err = w.broadcasts.Broadcast(ctx, c)
			return err
		}},
		{"broadcaster Ack", false, func(ctx context.Context, w *outcomeWorld) error {
			a, err := broadcaster.NewAck(&coordpb.AckRequest{BroadcastId: 1, NodeId: w.node, Epoch: w.epoch,
				Checkpoints: []*coordpb.Checkpoint{{Vchannel: w.vch, Term: w.pchTerm, TimeTick: ts}}})
			if err != nil {
				return err
			}
			return w.broadcasts.Ack(ctx, a)
		}},
		{"broadcaster Abandon", true, func(ctx context.Context, w *outcomeWorld) error {
			return w.broadcasts.Abandon(ctx, w.pending, "test")
		}},
		{"channels AddPChannels", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := channels.NewAddPChannels(&coordpb.AddPChannelsRequest{Names: []string{vocab.PChannelName("oc-dml", 2)}})
			if err != nil {
				return err
			}
			_, err = w.channels.AddPChannels(ctx, req)
			return err
		}},
		{"channels SetDrain", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := channels.NewDrain(&coordpb.DrainNodeRequest{NodeId: w.node}, true)
			if err != nil {
				return err
			}
			_, err = w.channels.SetDrain(ctx, req)
			return err
		}},
		{"channels AllocVChannels", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := channels.NewAllocVChannels(&coordpb.AllocVirtualChannelsRequest{CollectionId: 8, Count: 1, RequestId: "r-alloc"})
			if err != nil {
				return err
			}
			_, err = w.channels.AllocVChannels(ctx, req)
			return err
		}},
		{"channels DropVChannels", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := channels.NewDropVChannels(&coordpb.DropVirtualChannelsRequest{CollectionId: 7, RequestId: "r-drop"})
			if err != nil {
				return err
			}
			return w.channels.DropVChannels(ctx, req)
		}},
		{"channels ReportAssignmentError", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := channels.NewAssignmentError(&coordpb.ReportAssignmentErrorRequest{
				Pchannel: vocab.PChannelName("oc-dml", 0), Term: w.pchTerm, Error: "disk gone"})
			if err != nil {
				return err
			}
			_, err = w.channels.ReportAssignmentError(ctx, req)
			return err
		}},
		{"channels ResetReplicateRole", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := channels.NewResetRole(&coordpb.ResetReplicateRoleRequest{Reason: "test"})
			if err != nil {
				return err
			}
			_, err = w.channels.ResetReplicateRole(ctx, req)
			return err
		}},
		{"datapath Register", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := datapath.NewRegistration(&coordpb.RegisterStreamingNodeRequest{Address: "127.0.0.1:10", Incarnation: "j"}, 0)
			if err != nil {
				return err
			}
			_, err = w.data.Register(ctx, req)
			return err
		}},
		{"datapath EndSession (deregister)", false, func(ctx context.Context, w *outcomeWorld) error {
			_, err := w.data.EndSession(ctx, datapath.Session{Node: w.node, Epoch: w.epoch}, true,
				func(context.Context, uint64) (uint64, error) { return 0, nil })
			return err
		}},
		{"datapath AssignSegmentID", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := datapath.NewAssign(&coordpb.AssignSegmentIDRequest{NodeId: w.node,
				Requests: []*coordpb.SegmentIDRequest{{CollectionId: 7, PartitionId: 2, Vchannel: w.vch, PchannelTerm: w.pchTerm, Rows: 1}}})
			if err != nil {
				return err
			}
			_, err = w.data.AssignSegmentID(ctx, req)
			return err
		}},
		{"datapath SaveBinlogPaths", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := datapath.NewSave(&coordpb.SaveBinlogPathsRequest{NodeId: w.node, Vchannel: w.vch,
				PchannelTerm: w.pchTerm, SegmentId: w.segment, CollectionId: 7, PartitionId: 1, RequestId: "r-save",
				Checkpoints: []*coordpb.SegmentCheckpoint{{SegmentId: w.segment, NumOfRows: 1, Position: &coordpb.Position{Term: w.pchTerm, Offset: 1, Timestamp: ts}}}})
			if err != nil {
				return err
			}
			_, err = w.data.SaveBinlogPaths(ctx, req)
			return err
		}},
		{"datapath UpdateChannelCheckpoints", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := datapath.NewCheckpoints(&coordpb.UpdateChannelCheckpointsRequest{NodeId: w.node,
				Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: w.vch, PchannelTerm: w.pchTerm, Position: &coordpb.Position{Term: w.pchTerm, Offset: 1, Timestamp: ts}}}})
			if err != nil {
				return err
			}
			_, err = w.data.UpdateChannelCheckpoints(ctx, req)
			return err
		}},
		{"datapath CreateImportSegment", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := datapath.NewCreateImport(&coordpb.CreateImportSegmentRequest{CollectionId: 7,
				PartitionId: 1, Vchannel: w.vch, NodeId: w.node, PchannelTerm: w.pchTerm, Level: "L1", RequestId: "r-import"})
			if err != nil {
				return err
			}
			_, err = w.data.CreateImportSegment(ctx, req)
			return err
		}},
		{"datapath Flush", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := datapath.NewFlush(&coordpb.FlushRequest{CollectionId: 7})
			if err != nil {
				return err
			}
			_, err = w.data.Flush(ctx, req)
			return err
		}},
		{"datapath FlushAll", false, func(ctx context.Context, w *outcomeWorld) error {
			_, err := w.data.FlushAll(ctx)
			return err
		}},
		{"flush SealCollection", false, func(ctx context.Context, w *outcomeWorld) error {
			_, err := w.flush.SealCollection(ctx, 7, ts)
			return err
		}},
		{"manifest Commit", false, func(ctx context.Context, w *outcomeWorld) error {
			seg := int64(w.freeID)
			req, err := manifest.NewRequest(&coordpb.CommitSegmentManifestRequest{SegmentId: seg, RequestId: "r-manifest",
				Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
					ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: []string{fmt.Sprintf("insert_log/7/1/%d/100/0", seg)}}}}}},
				Catalog: &coordpb.CatalogMutation{NewSegment: &coordpb.ManifestNewSegment{CollectionId: 7, PartitionId: 1,
					Vchannel: w.vch, NumOfRows: 10}}})
			if err != nil {
				return err
			}
			_, err = w.manifests.Commit(ctx, req)
			return err
		}},
		{"membership AddVoter", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := membership.NewJoin(&coordpb.AddVoterRequest{Id: "n3", RaftAddr: "127.0.0.1:7003", ClusterId: "oc"})
			if err != nil {
				return err
			}
			return w.members.AddVoter(ctx, req)
		}},
		{"membership RemoveMember", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := membership.NewRemoval(&coordpb.RemoveMemberRequest{Id: "n2"})
			if err != nil {
				return err
			}
			return w.members.RemoveMember(ctx, req)
		}},
		{"membership Register", false, func(ctx context.Context, w *outcomeWorld) error {
			req, err := membership.NewRegistration(&coordpb.RegisterMemberRequest{Id: "n2", RaftAddr: "127.0.0.1:7002", GrpcAddr: "127.0.0.1:8002"})
			if err != nil {
				return err
			}
			return w.members.Register(ctx, req)
		}},
	}
}

// TestEveryProposingServiceKeepsAnUnknownOutcome is the outcome table:
// for every row, with the lost proposal applied and not, the call's error
// wraps leadership.ErrOutcomeUnknown, and the API answers it Unavailable
// with the trailer coordd-outcome: unknown (toStatus on a real member). A
// service that reads the deposed node's later "not the leader" (or
// anything else) as its answer fails its row.
func TestEveryProposingServiceKeepsAnUnknownOutcome(t *testing.T) {
	answers := map[string]error{}
	for _, applied := range []bool{true, false} {
		for _, r := range outcomeRows() {
			name := fmt.Sprintf("%s/applied=%v", r.name, applied)
			t.Run(name, func(t *testing.T) {
				w := newOutcomeWorld(t, applied, r.pendingTask)
				ctx, cancel := context.WithTimeout(w.l.Deadline(), 10*time.Second)
				defer cancel()
				w.l.armed.Store(true)
				err := r.call(ctx, w)
				answers[name] = err
				if w.l.hits.Load() != 1 {
					t.Fatalf("the call never proposed (err %v): the row does not test its service", err)
				}
				if !errors.Is(err, leadership.ErrOutcomeUnknown) {
					t.Fatalf("answered %v; want an unknown outcome (ErrNotLeader in the chain: %v)", err, errors.Is(err, leadership.ErrNotLeader))
				}
			})
		}
	}
	t.Run("trailers", func(t *testing.T) {
		tn := startTestNode(t)
		for name, err := range answers {
			ts := &trailerStream{}
			st := tn.srv.toStatus(grpc.NewContextWithServerTransportStream(context.Background(), ts), err)
			if code := status.Code(st); code != codes.Unavailable || strings.Join(ts.trailer.Get(MDOutcome), ",") != OutcomeUnknown {
				t.Errorf("%s: the API answers %v with %s, %s %v; want Unavailable, %s %q", name, err, code, MDOutcome,
					ts.trailer.Get(MDOutcome), MDOutcome, OutcomeUnknown)
			}
		}
	})
}
