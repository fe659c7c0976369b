//go:build test

package milvusconformance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/milvus-io/milvus-proto/go-api/v2/commonpb"
	"github.com/milvus-io/milvus-proto/go-api/v2/msgpb"
	"github.com/milvus-io/milvus/pkg/v2/proto/streamingpb"
	"github.com/milvus-io/milvus/pkg/v2/streaming/util/message"
	// Milvus's test WAL registers the decoder of WAL Test's message IDs,
	// the ones coordd answers (docs/milvus.md#message-ids).
	_ "github.com/milvus-io/milvus/pkg/v2/streaming/walimpls/impls/walimplstest"
)

// owner is where the full assignment puts one PChannel.
type owner struct {
	node int64
	addr string
	term int64
}

// placements lists every PChannel of a full assignment with its owner.
func placements(a *streamingpb.FullStreamingNodeAssignmentWithVersion) map[string]owner {
	out := map[string]owner{}
	for _, n := range a.GetAssignments() {
		for _, ch := range n.GetChannels() {
			out[ch.GetName()] = owner{node: n.GetNode().GetServerId(), addr: n.GetNode().GetAddress(), term: ch.GetTerm()}
		}
	}
	return out
}

// currentAssignment is the full assignment as of now: the first answer of
// a new AssignmentDiscover stream.
func currentAssignment(t *testing.T, conn *grpc.ClientConn) *streamingpb.FullStreamingNodeAssignmentWithVersion {
	t.Helper()
	d, err := openDiscover(t, conn)
	if err != nil {
		t.Fatalf("AssignmentDiscover: %v", err)
	}
	defer d.cancel()
	a, err := d.next()
	if err != nil {
		t.Fatalf("AssignmentDiscover: %v", err)
	}
	return a
}

// balanced: the 16 PChannels of `coordd dev` are all assigned, 8 on each
// streaming node.
func balanced(a *streamingpb.FullStreamingNodeAssignmentWithVersion) bool {
	ps := placements(a)
	nodes := map[int64]int{}
	for _, o := range ps {
		nodes[o.node]++
	}
	// The balancer evens the 16 out; until it has, it moves PChannels
	// under the test's feet (an ack's owner, a paused node's channel).
	if len(ps) != 16 || len(nodes) != 2 {
		return false
	}
	for _, n := range nodes {
		if n != 8 {
			return false
		}
	}
	return true
}

func newer(a, b *streamingpb.VersionPair) bool {
	return b.GetGlobal() > a.GetGlobal() || b.GetGlobal() == a.GetGlobal() && b.GetLocal() > a.GetLocal()
}

// discover opens AssignmentDiscover on conn; next returns the next full
// assignment, checking that versions only grow.
type discover struct {
	t      *testing.T
	stream grpc.BidiStreamingClient[streamingpb.AssignmentDiscoverRequest, streamingpb.AssignmentDiscoverResponse]
	last   *streamingpb.VersionPair
	cancel context.CancelFunc
}

func openDiscover(t *testing.T, conn *grpc.ClientConn) (*discover, error) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := streamingpb.NewStreamingCoordAssignmentServiceClient(conn).AssignmentDiscover(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	d := &discover{t: t, stream: s, cancel: cancel}
	t.Cleanup(cancel)
	return d, nil
}

func (d *discover) next() (*streamingpb.FullStreamingNodeAssignmentWithVersion, error) {
	r, err := d.stream.Recv()
	if err != nil {
		return nil, err
	}
	a := r.GetFullAssignment()
	if a == nil {
		return nil, fmt.Errorf("not a full assignment: %v", r)
	}
	if d.last != nil && !newer(d.last, a.GetVersion()) {
		d.t.Errorf("assignment version %v after %v: versions must grow", a.GetVersion(), d.last)
	}
	d.last = a.GetVersion()
	return a, nil
}

// until reads assignments until cond holds (bounded by bound, scaled).
func (d *discover) until(bound time.Duration, what string, cond func(*streamingpb.FullStreamingNodeAssignmentWithVersion) bool) *streamingpb.FullStreamingNodeAssignmentWithVersion {
	d.t.Helper()
	timer := time.AfterFunc(scaled(bound), d.cancel)
	defer timer.Stop()
	for {
		a, err := d.next()
		if err != nil {
			d.t.Fatalf("waiting for %s: %v", what, err)
		}
		if cond(a) {
			return a
		}
	}
}

// streamingCode is the StreamingError Milvus's client finds in err.
func streamingCode(err error) (streamingpb.StreamingCode, bool) {
	for _, d := range status.Convert(err).Details() {
		if se, ok := d.(*streamingpb.StreamingError); ok {
			return se.GetCode(), true
		}
	}
	return 0, false
}

// createCollection is a CreateCollection broadcast built with Milvus's
// message builders, holding the exclusive collection-name key.
func createCollection(id int64, name string, vchannels []string) message.BroadcastMutableMessage {
	return message.NewCreateCollectionMessageBuilderV1().
		WithHeader(&message.CreateCollectionMessageHeader{CollectionId: id, DbId: 1}).
		WithBody(&msgpb.CreateCollectionRequest{CollectionName: name, CollectionID: id, DbName: "default", VirtualChannelNames: vchannels}).
		WithBroadcast(vchannels, message.NewExclusiveCollectionNameResourceKey("default", name)).
		MustBuildBroadcast()
}

// snOf is the `coordd dev` streaming node (1-based) at addr.
func (c *devCluster) snOf(t *testing.T, addr string) int {
	t.Helper()
	for i := 1; i <= 2; i++ {
		if c.snAddr(i) == addr {
			return i
		}
	}
	t.Fatalf("no streaming node of this cluster listens on %s", addr)
	return 0
}

// twoPChannels picks one PChannel of each streaming node.
func twoPChannels(t *testing.T, ps map[string]owner) (string, string) {
	t.Helper()
	names := make([]string, 0, len(ps))
	for n := range ps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, a := range names {
		for _, b := range names {
			if ps[a].node != ps[b].node {
				return a, b
			}
		}
	}
	t.Fatal("no two pchannels on different nodes")
	return "", ""
}

// TestBroadcastAndAck: a CreateCollection built with Milvus's builders and
// sent with Milvus's generated client gets one result per VChannel and a
// broadcast ID; each result, turned into an immutable message with Milvus's
// library, is acked by the VChannel owner's node credential (another
// node's is PermissionDenied); while a CreateCollection holds its
// collection-name key (its target's owner is paused) a second exclusive
// broadcast on the key is refused with RESOURCE_ACQUIRED and creates
// nothing, and is accepted once the first is done.
func TestBroadcastAndAck(t *testing.T) {
	c := startDev(t)
	proxy := c.dial(t, 1, "proxy")
	bc := streamingpb.NewStreamingCoordBroadcastServiceClient(proxy)
	d, err := openDiscover(t, proxy)
	if err != nil {
		t.Fatal(err)
	}
	a := d.until(90*time.Second, "16 pchannels assigned over both streaming nodes", balanced)
	ps := placements(a)
	pa, pb := twoPChannels(t, ps)
	vchs := []string{pa + "_4242v0", pb + "_4242v1"}

	msg := createCollection(4242, "c1", vchs)
	ctx, cancel := context.WithTimeout(context.Background(), scaled(60*time.Second))
	defer cancel()
	resp, err := bc.Broadcast(ctx, &streamingpb.BroadcastRequest{Message: msg.IntoMessageProto()})
	if err != nil {
		t.Fatalf("Broadcast: %v", err)
	}
	if resp.GetBroadcastId() == 0 || len(resp.GetResults()) != len(vchs) {
		t.Fatalf("Broadcast answered %v", resp)
	}
	// Ack every VChannel's copy as Milvus's consumers do.
	msg.WithBroadcastID(resp.GetBroadcastId())
	for _, m := range msg.SplitIntoMutableMessage() {
		r, ok := resp.GetResults()[m.VChannel()]
		if !ok {
			t.Fatalf("no result for %s in %v", m.VChannel(), resp)
		}
		if r.GetId().GetWALName() != commonpb.WALName_Test {
			t.Fatalf("result of %s: WAL %v", m.VChannel(), r.GetId().GetWALName())
		}
		id := message.MustUnmarshalMessageID(r.GetId())
		lc := message.MustUnmarshalMessageID(r.GetLastConfirmedId())
		if r.GetTimetick() == 0 || !lc.EQ(id) {
			t.Fatalf("result of %s: %v", m.VChannel(), r)
		}
		im := m.WithTimeTick(r.GetTimetick()).WithLastConfirmed(lc).IntoImmutableMessage(id)
		if got := im.BroadcastHeader().BroadcastID; got != resp.GetBroadcastId() {
			t.Fatalf("immutable message carries broadcast %d", got)
		}
		req := &streamingpb.BroadcastAckRequest{Message: im.IntoImmutableMessageProto()}
		pch := m.VChannel()[:strings.LastIndexByte(m.VChannel(), '_')]
		// The balancer may still move the PChannel (a move is a newer
		// assignment version): the owner is read fresh around each pair of
		// acks, and a pair that raced a move is tried again (an ack is
		// idempotent).
		for attempt := 1; ; attempt++ {
			before := currentAssignment(t, proxy)
			own := c.snOf(t, placements(before)[pch].addr)
			other := 3 - own
			_, errOther := streamingpb.NewStreamingCoordBroadcastServiceClient(c.dial(t, 2, fmt.Sprintf("node-%d", other))).Ack(ctx, req)
			_, errOwn := streamingpb.NewStreamingCoordBroadcastServiceClient(c.dial(t, 2, fmt.Sprintf("node-%d", own))).Ack(ctx, req)
			after := currentAssignment(t, proxy)
			if newer(before.GetVersion(), after.GetVersion()) && attempt < 5 {
				t.Logf("assignment changed during the acks of %s (%v -> %v); again", m.VChannel(), before.GetVersion(), after.GetVersion())
				continue
			}
			if status.Code(errOther) != codes.PermissionDenied {
				t.Errorf("ack of %s by node-%d (not its owner): %v, want PermissionDenied", m.VChannel(), other, errOther)
			}
			if errOwn != nil {
				t.Errorf("ack of %s by its owner node-%d: %v", m.VChannel(), own, errOwn)
			}
			break
		}
	}

	// Hold c2's key: its CreateCollection cannot reach pb while pb's owner
	// is paused.
	paused := fmt.Sprintf("sn%d", c.snOf(t, ps[pb].addr))
	c.signal(t, paused, syscall.SIGSTOP)
	resumed := false
	defer func() {
		if !resumed {
			c.signal(t, paused, syscall.SIGCONT)
		}
	}()
	first := make(chan error, 1)
	go func() {
		fctx, fcancel := context.WithTimeout(context.Background(), scaled(3*time.Minute))
		defer fcancel()
		r, err := bc.Broadcast(fctx, &streamingpb.BroadcastRequest{Message: createCollection(4343, "c2", []string{pa + "_4343v0", pb + "_4343v1"}).IntoMessageProto()})
		if err == nil && len(r.GetResults()) != 2 {
			err = fmt.Errorf("answer %v", r)
		}
		first <- err
	}()
	eventually(t, 30*time.Second, "the first c2 broadcast pending", func() bool {
		n, err := c.pendingBroadcasts(t, 1)
		return err == nil && n == 1
	})
	second := createCollection(4444, "c2", []string{pa + "_4444v0", pb + "_4444v1"})
	_, err = bc.Broadcast(ctx, &streamingpb.BroadcastRequest{Message: second.IntoMessageProto()})
	if code, ok := streamingCode(err); !ok || code != streamingpb.StreamingCode_STREAMING_CODE_RESOURCE_ACQUIRED || status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("second exclusive broadcast on c2 while the first is pending: %v (streaming code %v)", err, code)
	}
	if n, err := c.pendingBroadcasts(t, 1); err != nil || n != 1 {
		t.Fatalf("after the refusal: %d pending (%v), want the first only", n, err)
	}
	c.signal(t, paused, syscall.SIGCONT)
	resumed = true
	select {
	case err := <-first:
		if err != nil {
			t.Fatalf("the first c2 broadcast: %v", err)
		}
	case <-time.After(scaled(3 * time.Minute)):
		t.Fatal("the first c2 broadcast did not finish")
	}
	if _, err := bc.Broadcast(ctx, &streamingpb.BroadcastRequest{Message: second.IntoMessageProto()}); err != nil {
		t.Fatalf("second broadcast on c2 once the first is done: %v", err)
	}
}

// TestAssignmentDiscover: Milvus's client gets the full assignment with a
// version; report_error for a PChannel at its term gives a newer
// assignment with the PChannel at a higher term; a killed streaming node's
// PChannels move to the survivor at higher terms; a stale report_error is
// refused with UNMATCHED_CHANNEL_TERM; and across a leader kill the stream
// (reopened on another member when its own died) goes on with a newer
// global version, and a broadcast after it is done exactly once.
func TestAssignmentDiscover(t *testing.T) {
	c := startDev(t)
	leader := c.leader(t)
	follower := leader%3 + 1
	conn := c.dial(t, follower, "proxy")
	d, err := openDiscover(t, conn)
	if err != nil {
		t.Fatal(err)
	}
	a := d.until(90*time.Second, "16 pchannels assigned over both streaming nodes", balanced)
	if a.GetCchannel().GetMeta().GetPchannel() == "" || a.GetStreamingVersion().GetVersion() != 1 {
		t.Errorf("full assignment without control channel or streaming version: %v", a)
	}
	ps := placements(a)

	// report_error fences exactly the reported term.
	p, _ := twoPChannels(t, ps)
	was := ps[p]
	if err := d.stream.Send(&streamingpb.AssignmentDiscoverRequest{Command: &streamingpb.AssignmentDiscoverRequest_ReportError{
		ReportError: &streamingpb.ReportAssignmentErrorRequest{Pchannel: &streamingpb.PChannelInfo{Name: p, Term: was.term},
			Err: &streamingpb.StreamingError{Code: streamingpb.StreamingCode_STREAMING_CODE_UNRECOVERABLE, Cause: "conformance test"}}}}); err != nil {
		t.Fatal(err)
	}
	a = d.until(60*time.Second, p+" assigned again at a higher term", func(a *streamingpb.FullStreamingNodeAssignmentWithVersion) bool {
		o, ok := placements(a)[p]
		return ok && o.term > was.term
	})
	if got := placements(a)[p].term; got != was.term+1 {
		t.Logf("%s went from term %d to %d", p, was.term, got)
	}

	// Kill one streaming node: its PChannels move to the other.
	ps = placements(a)
	victimAddr := ps[p].addr
	victim := c.snOf(t, victimAddr)
	held := map[string]int64{}
	for name, o := range ps {
		if o.addr == victimAddr {
			held[name] = o.term
		}
	}
	c.signal(t, fmt.Sprintf("sn%d", victim), syscall.SIGKILL)
	a = d.until(90*time.Second, "the killed node's pchannels on the survivor at higher terms", func(a *streamingpb.FullStreamingNodeAssignmentWithVersion) bool {
		now := placements(a)
		for name, term := range held {
			o, ok := now[name]
			if !ok || o.addr == victimAddr || o.term <= term {
				return false
			}
		}
		return true
	})
	for name, term := range held {
		if got := placements(a)[name].term; got != term+1 {
			t.Logf("%s moved from term %d to %d", name, term, got)
		}
	}

	// A stale term: refused, the stream ends, Milvus's client reopens it.
	if err := d.stream.Send(&streamingpb.AssignmentDiscoverRequest{Command: &streamingpb.AssignmentDiscoverRequest_ReportError{
		ReportError: &streamingpb.ReportAssignmentErrorRequest{Pchannel: &streamingpb.PChannelInfo{Name: p, Term: was.term}}}}); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err = d.next(); err != nil {
			break
		}
	}
	if code, _ := streamingCode(err); code != streamingpb.StreamingCode_STREAMING_CODE_UNMATCHED_CHANNEL_TERM {
		t.Fatalf("stale report_error: %v", err)
	}

	// Leader kill: the stream on a surviving member goes on.
	d, err = openDiscover(t, conn)
	if err != nil {
		t.Fatal(err)
	}
	before, err := d.next()
	if err != nil {
		t.Fatal(err)
	}
	c.signal(t, fmt.Sprintf("n%d", leader), syscall.SIGKILL)
	d.until(60*time.Second, "an assignment of the next leadership", func(a *streamingpb.FullStreamingNodeAssignmentWithVersion) bool {
		return a.GetVersion().GetGlobal() > before.GetVersion().GetGlobal()
	})
	// A broadcast through the survivor is done once.
	bc := streamingpb.NewStreamingCoordBroadcastServiceClient(conn)
	ps = placements(before)
	var pas []string
	for name := range ps {
		pas = append(pas, name)
	}
	sort.Strings(pas)
	msg := createCollection(5555, "c5", []string{pas[0] + "_5555v0", pas[1] + "_5555v1"})
	ctx, cancel := context.WithTimeout(context.Background(), scaled(90*time.Second))
	defer cancel()
	var resp *streamingpb.BroadcastResponse
	for {
		resp, err = bc.Broadcast(ctx, &streamingpb.BroadcastRequest{Message: msg.IntoMessageProto()})
		if err == nil || status.Code(err) != codes.Unavailable || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil || len(resp.GetResults()) != 2 {
		t.Fatalf("broadcast after the leader kill: %v %v", resp, err)
	}
	if n := c.countBroadcasts(t, follower, "CreateCollection"); n != 1 {
		t.Errorf("%d CreateCollection tasks after one broadcast, want 1", n)
	}
}
