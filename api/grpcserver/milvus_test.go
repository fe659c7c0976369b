package grpcserver

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/vocab"
)

// milvusBroadcastOf is a Milvus broadcast message of typ over vchs holding
// keys, with Milvus's property encodings; header is its typed header (_h)
// or nil.
func milvusBroadcastOf(typ milvuspb.MessageType, header proto.Message, vchs []string, keys ...*milvuspb.ResourceKey) *milvuspb.BroadcastRequest {
	props := map[string]string{
		propType:      strconv.Itoa(int(typ)),
		"_v":          "2",
		propBroadcast: encodeProp(&milvuspb.BroadcastHeader{Vchannels: vchs, ResourceKeys: keys}),
	}
	if header != nil {
		props[propHeader] = encodeProp(header)
	}
	return &milvuspb.BroadcastRequest{Message: &milvuspb.Message{Payload: []byte("milvus-body"), Properties: props}}
}

func collKey(db, coll string, shared bool) *milvuspb.ResourceKey {
	return &milvuspb.ResourceKey{Domain: milvuspb.ResourceDomain_ResourceDomainCollectionName, Key: db + ":" + coll, Shared: shared}
}

// streamingCode is the StreamingError a Milvus client finds in err.
func streamingCode(t *testing.T, err error) (codes.Code, milvuspb.StreamingCode) {
	t.Helper()
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if se, ok := d.(*milvuspb.StreamingError); ok {
			return st.Code(), se.Code
		}
	}
	t.Fatalf("no StreamingError in %v", err)
	return 0, 0
}

// TestMilvusBroadcast: a Milvus CreateCollection becomes coordd's, with
// the callback's payload made from its header (and the Milvus message kept
// in field 100), the keys in coordd's domains and the header's targets;
// the answer has one result per named VChannel as a Test-WAL message ID
// and the broadcast ID.
func TestMilvusBroadcast(t *testing.T) {
	tn, fb, _ := startBroadcastNode(t)
	mc := milvuspb.NewStreamingCoordBroadcastServiceClient(tn.conn)
	v0, v1 := vocab.VChannelName(bcP0, 100, 0), vocab.VChannelName(bcP1, 100, 1)
	fb.setAnswer(func(_ context.Context, req broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{BroadcastID: 42, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: v0, Term: 1, Offset: 7, TimeTick: 1000}, {Vchannel: v1, Term: 1, Offset: 9, TimeTick: 1001},
			{Vchannel: bcCChan, Term: 1, Offset: 3, TimeTick: 1002}}}, nil
	})
	req := milvusBroadcastOf(milvuspb.MessageType_CreateCollection, &milvuspb.CreateCollectionMessageHeader{CollectionId: 100, DbId: 1},
		[]string{v0, v1}, collKey("default", "c1", false), &milvuspb.ResourceKey{Domain: milvuspb.ResourceDomain_ResourceDomainDBName, Key: "default", Shared: true})
	resp, err := mc.Broadcast(callCtx(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.BroadcastId != 42 || len(resp.Results) != 2 {
		t.Fatalf("answer %v", resp)
	}
	if r := resp.Results[v0]; r.GetId().GetWALName() != milvuspb.WALName_Test || r.GetId().GetId() != "7" || r.Timetick != 1000 ||
		r.GetLastConfirmedId().GetId() != "7" {
		t.Errorf("result of %s: %v", v0, r)
	}
	got := fb.requests()
	if len(got) != 1 {
		t.Fatalf("%d broadcaster calls", len(got))
	}
	br := got[0]
	wantKeys := []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "default:c1"},
		{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "default", Shared: true}}
	if br.MessageType != vocab.MsgCreateCollection || br.AckSyncUp || !reflect.DeepEqual(br.VChannels, []string{v0, v1}) ||
		len(br.ResourceKeys) != 2 || !proto.Equal(br.ResourceKeys[0], wantKeys[0]) || !proto.Equal(br.ResourceKeys[1], wantKeys[1]) {
		t.Errorf("broadcaster got %+v", br)
	}
	var p logpb.CreateCollectionPayload
	if err := proto.Unmarshal(br.Payload, &p); err != nil || p.CollectionId != 100 || p.Shards != 2 {
		t.Fatalf("payload %v %v", &p, err)
	}
	var kept milvuspb.Message
	if err := proto.Unmarshal(milvusField(t, p.ProtoReflect().GetUnknown()), &kept); err != nil || !proto.Equal(&kept, req.Message) {
		t.Errorf("the Milvus message in field %d: %v %v", milvusPayloadField, &kept, err)
	}
}

// milvusField returns field milvusPayloadField of unknown-field bytes.
func milvusField(t *testing.T, b []byte) []byte {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		b = b[n:]
		if num == milvusPayloadField && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b)
			return v
		}
		b = b[protowire.ConsumeFieldValue(num, typ, b):]
	}
	t.Fatalf("no field %d", milvusPayloadField)
	return nil
}

// TestMilvusBroadcastRefusals: bad input and held keys get the Milvus
// error code a Milvus client branches on, under Milvus's gRPC code, and
// change nothing (no command, no broadcaster call).
func TestMilvusBroadcastRefusals(t *testing.T) {
	tn, fb, _ := startBroadcastNode(t)
	mc := milvuspb.NewStreamingCoordBroadcastServiceClient(tn.conn)
	// A pending task holding c1 exclusively.
	mustCommit(t, tn, &logpb.CreateBroadcast{MessageType: "AlterCollection", Vchannels: []string{bcCChan},
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "default:c1"}}})
	v0 := vocab.VChannelName(bcP0, 100, 0)
	create := func(keys ...*milvuspb.ResourceKey) *milvuspb.BroadcastRequest {
		return milvusBroadcastOf(milvuspb.MessageType_CreateCollection, &milvuspb.CreateCollectionMessageHeader{CollectionId: 100}, []string{v0}, keys...)
	}
	noHeader := create()
	delete(noHeader.Message.Properties, propBroadcast)
	withID := create()
	withID.Message.Properties[propBroadcast] = encodeProp(&milvuspb.BroadcastHeader{BroadcastId: 5, Vchannels: []string{v0}})
	noType := create()
	delete(noType.Message.Properties, propType)
	inv, fp := codes.InvalidArgument, codes.FailedPrecondition
	for _, c := range []struct {
		name  string
		req   *milvuspb.BroadcastRequest
		grpc  codes.Code
		code  milvuspb.StreamingCode
		cause string
	}{
		{"no message", &milvuspb.BroadcastRequest{}, inv, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "no message"},
		{"no broadcast header", noHeader, inv, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "no broadcast header"},
		{"no type", noType, inv, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "no type"},
		{"broadcast id set", withID, inv, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "coordd assigns it"},
		{"unknown domain", create(&milvuspb.ResourceKey{Domain: 55, Key: "x"}), inv, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "domain 55"},
		{"not a broadcast type", milvusBroadcastOf(milvuspb.MessageType_Insert, nil, []string{v0}), inv,
			milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "not a known broadcast message type"},
		{"CreateCollection without header", milvusBroadcastOf(milvuspb.MessageType_CreateCollection, nil, []string{v0}), inv,
			milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "positive collection id"},
		{"no such pchannel", milvusBroadcastOf(milvuspb.MessageType_AlterCollection, nil, []string{"by-dev-rootcoord-dml_9_100v0"}), fp,
			milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, "pchannel by-dev-rootcoord-dml_9 does not exist"},
		{"no such vchannel", milvusBroadcastOf(milvuspb.MessageType_AlterCollection, nil, []string{vocab.VChannelName(bcP1, 999, 0)}), fp,
			milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, "no collection has it"},
		{"held key", create(collKey("default", "c1", false)), fp, milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED, "is held by broadcast"},
		{"shared on a held key", create(collKey("default", "c1", true)), fp, milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED, "is held by broadcast"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := observeBroadcasts(t, tn, fb)
			_, err := mc.Broadcast(callCtx(t), c.req)
			g, code := streamingCode(t, err)
			if g != c.grpc || code != c.code || !containsText(status.Convert(err).Message(), c.cause) {
				t.Errorf("got %v %v %q, want %v %v ...%q...", g, code, status.Convert(err).Message(), c.grpc, c.code, c.cause)
			}
			if after := observeBroadcasts(t, tn, fb); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused broadcast changed %+v into %+v", before, after)
			}
		})
	}
	// A lock wait that outlives the call's deadline is RESOURCE_ACQUIRED
	// as well (a key taken after the check).
	fb.setAnswer(func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{}, &broadcaster.LockTimeoutError{Key: "CollectionName:default:c2@X", Err: context.DeadlineExceeded}
	})
	_, err := mc.Broadcast(callCtx(t), create(collKey("default", "c2", false)))
	if g, code := streamingCode(t, err); g != fp || code != milvuspb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED {
		t.Errorf("lock timeout: %v %v", g, code)
	}
}

func containsText(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && indexText(s, sub) >= 0)
}

func indexText(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// TestMilvusAckRefusals: an ack without what coordd needs, or for a
// VChannel with no owner, is refused and changes nothing.
func TestMilvusAckRefusals(t *testing.T) {
	tn, fb, _ := startBroadcastNode(t)
	mc := milvuspb.NewStreamingCoordBroadcastServiceClient(tn.conn)
	v0 := vocab.VChannelName(bcP0, 100, 0)
	noTT := milvusAckOf(1, v0, 1, 1)
	delete(noTT.Message.Properties, propTimeTick)
	otherWAL := milvusAckOf(1, v0, 1, 1)
	otherWAL.Message.Id.WALName = milvuspb.WALName_Kafka
	for _, c := range []struct {
		name string
		req  *milvuspb.BroadcastAckRequest
		code milvuspb.StreamingCode
	}{
		{"no message", &milvuspb.BroadcastAckRequest{}, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT},
		{"no broadcast id", milvusAckOf(0, v0, 1, 1), milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT},
		{"no time tick", noTT, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT},
		{"another WAL's id", otherWAL, milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT},
		{"no such pchannel", milvusAckOf(1, "by-dev-rootcoord-dml_9_100v0", 1, 1), milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST},
		{"no owner", milvusAckOf(1, v0, 1, 1), milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := observeBroadcasts(t, tn, fb)
			_, err := mc.Ack(callCtx(t), c.req)
			if _, code := streamingCode(t, err); code != c.code {
				t.Errorf("got %v (%v), want %v", code, err, c.code)
			}
			if after := observeBroadcasts(t, tn, fb); !reflect.DeepEqual(before, after) {
				t.Errorf("a refused ack changed %+v into %+v", before, after)
			}
		})
	}
}

// TestMilvusAckBoundToOwner: on a secured cluster a Milvus ack is the
// VChannel owner's: its node credential's ack reaches the broadcaster as
// the owner's session at the PChannel's current term; another node's
// credential is PermissionDenied and nothing reaches it.
func TestMilvusAckBoundToOwner(t *testing.T) {
	oc := startOwnedCluster(t, false)
	fb := &fakeBroadcasts{}
	oc.tn.srv.broadcasts = fb // before any call: the fake records the acks
	mc := milvuspb.NewStreamingCoordBroadcastServiceClient(oc.tn.conn)
	if _, err := mc.Ack(oc.as(callCtx(t), "other"), milvusAckOf(9, dv0, 5, 77)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("another node's ack: %v", err)
	}
	if fb.calls() != 0 {
		t.Fatal("a refused ack reached the broadcaster")
	}
	if _, err := mc.Ack(oc.as(callCtx(t), "owner"), milvusAckOf(9, dv0, 5, 77)); err != nil {
		t.Fatal(err)
	}
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if len(fb.acks) != 1 {
		t.Fatalf("acks %v", fb.acks)
	}
	a := fb.acks[0]
	want := &logpb.VChannelCheckpoint{Vchannel: dv0, Term: 2, Offset: 5, TimeTick: 77}
	if a.id != 9 || a.node != 1 || a.epoch != oc.epoch1 || len(a.cps) != 1 || !proto.Equal(a.cps[0], want) {
		t.Errorf("ack %+v", a)
	}
}

// TestMilvusAssignmentDiscover: the full assignment with its version,
// pushed again after a report_error that fenced the term; a stale term
// ends the stream with UNMATCHED_CHANNEL_TERM and changes nothing; close
// is answered with close.
func TestMilvusAssignmentDiscover(t *testing.T) {
	oc := startOwnedCluster(t, false)
	mc := milvuspb.NewStreamingCoordAssignmentServiceClient(oc.tn.conn)
	ctx := oc.as(callCtx(t), "proxy")
	stream, err := mc.AssignmentDiscover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := recvFull(t, stream)
	if len(first.Assignments) != 2 || first.Cchannel.GetMeta().GetPchannel() != "dml_0" {
		t.Fatalf("first assignment %v", first)
	}
	if ch := first.Assignments[0].Channels; first.Assignments[0].Node.ServerId != 1 || len(ch) != 1 || ch[0].Name != "dml_0" || ch[0].Term != 2 {
		t.Fatalf("node 1's channels in %v", first)
	}
	// The owner's WAL broke at term 2: the channel leaves node 1.
	if err := stream.Send(&milvuspb.AssignmentDiscoverRequest{Command: &milvuspb.AssignmentDiscoverRequest_ReportError{
		ReportError: &milvuspb.ReportAssignmentErrorRequest{Pchannel: &milvuspb.PChannelInfo{Name: "dml_0", Term: 2},
			Err: &milvuspb.StreamingError{Code: milvuspb.StreamingCode_STREAMING_CODE_UNRECOVERABLE, Cause: "wal broke"}}}}); err != nil {
		t.Fatal(err)
	}
	next := recvFull(t, stream)
	if !versionLess(first.Version, next.Version) || len(next.Assignments[0].Channels) != 0 {
		t.Fatalf("after report_error: %v (was %v)", next, first)
	}
	if p, _ := oc.tn.node.State().PChannel("dml_0"); p.State != logpb.PChannelState_PCHANNEL_UNAVAILABLE {
		t.Fatalf("dml_0 is %v", p.State)
	}
	// A stale term: refused, nothing changes.
	before := oc.tn.node.State().AppliedIndex()
	_ = stream.Send(&milvuspb.AssignmentDiscoverRequest{Command: &milvuspb.AssignmentDiscoverRequest_ReportError{
		ReportError: &milvuspb.ReportAssignmentErrorRequest{Pchannel: &milvuspb.PChannelInfo{Name: "dml_1", Term: 1}}}})
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}
	if _, code := streamingCode(t, err); code != milvuspb.StreamingCode_STREAMING_CODE_UNMATCHED_CHANNEL_TERM {
		t.Errorf("stale term: %v", err)
	}
	if after := oc.tn.node.State().AppliedIndex(); after != before {
		t.Errorf("a stale report moved the applied index from %d to %d", before, after)
	}
	// close is answered with close.
	stream, err = mc.AssignmentDiscover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recvFull(t, stream)
	if err := stream.Send(&milvuspb.AssignmentDiscoverRequest{Command: &milvuspb.AssignmentDiscoverRequest_Close{Close: &milvuspb.CloseAssignmentDiscoverRequest{}}}); err != nil {
		t.Fatal(err)
	}
	for {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("no close answer: %v", err)
		}
		if r.GetClose() != nil {
			break
		}
	}
	if _, err := stream.Recv(); !errors.Is(err, context.Canceled) && err.Error() != "EOF" {
		t.Errorf("after close: %v", err)
	}
}

func recvFull(t *testing.T, s interface {
	Recv() (*milvuspb.AssignmentDiscoverResponse, error)
}) *milvuspb.FullStreamingNodeAssignmentWithVersion {
	t.Helper()
	r, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if r.GetFullAssignment() == nil {
		t.Fatalf("not a full assignment: %v", r)
	}
	return r.GetFullAssignment()
}

func versionLess(a, b *milvuspb.VersionPair) bool {
	return a.Global < b.Global || a.Global == b.Global && a.Local < b.Local
}
