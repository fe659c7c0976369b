package manifest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/objectstore"
)

const testColl = int64(100)

var testVChannel = commands.VChannelName(commands.PChannelName("dml", 0), testColl, 0)

// fixture: a fake leader over a real FSM (term 1, a collection with one
// VChannel, IDs 1..999 reserved) and a real directory object store.
type fixture struct {
	t     *testing.T
	l     *controllertest.Leader
	store objectstore.Store
	c     *Committer
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	clock := cfg.Clock
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	l := controllertest.NewLeader(t, clock, 1)
	l.MustPropose(t, &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{commands.PChannelName("dml", 0)}})
	l.MustPropose(t, &logpb.AllocVirtualChannels{CollectionId: testColl, Count: 1})
	l.MustPropose(t, &logpb.ReserveIDs{Count: 999})
	if cfg.Store == nil {
		st, err := objectstore.Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		cfg.Store = st
	}
	return &fixture{t: t, l: l, store: cfg.Store, c: New(l, cfg)}
}

func createReq(seg int64) *coordpb.CommitSegmentManifestRequest {
	return &coordpb.CommitSegmentManifestRequest{SegmentId: seg,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
			ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100, 101}, Files: []string{dataKey(seg, "0")}}}}}},
		Catalog: &coordpb.CatalogMutation{NewSegment: &coordpb.ManifestNewSegment{CollectionId: testColl, PartitionId: 1,
			Vchannel: testVChannel, NumOfRows: 10}}}
}

// dataKey and statsKey are object keys under segment seg's directories
// (docs/semantics.md#manifest-keys).
func dataKey(seg int64, rest string) string {
	return fmt.Sprintf("insert_log/%d/1/%d/100/%s", testColl, seg, rest)
}

func statsKey(seg int64, rest string) string {
	return fmt.Sprintf("stats_log/%d/1/%d/%s", testColl, seg, rest)
}

func statsReq(seg int64, key string, files ...string) *coordpb.CommitSegmentManifestRequest {
	for i, f := range files {
		files[i] = statsKey(seg, f)
	}
	return &coordpb.CommitSegmentManifestRequest{SegmentId: seg,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
			Stats: []*coordpb.ManifestStatsEntry{{Key: key, Files: files}}}}}}
}

// create makes segment seg with its first revision.
func (f *fixture) create(seg int64) {
	f.t.Helper()
	if _, err := commitProto(context.Background(), f.c, createReq(seg)); err != nil {
		f.t.Fatalf("create segment %d: %v", seg, err)
	}
}

func (f *fixture) version(seg int64) int64 {
	f.t.Helper()
	p, ok, err := f.l.State().ManifestPointer(seg)
	if !ok || err != nil {
		f.t.Fatalf("segment %d: exists %v, %v", seg, ok, err)
	}
	return p.Version
}

func (f *fixture) revision(seg int64) *coordpb.ManifestRevision {
	f.t.Helper()
	out, err := f.c.Get(context.Background(), f.l.State(), seg)
	if err != nil {
		f.t.Fatalf("get segment %d: %v", seg, err)
	}
	return out.Revision
}

func (f *fixture) objects() []string {
	f.t.Helper()
	keys, err := f.store.List(context.Background(), commands.ManifestRoot)
	if err != nil {
		f.t.Fatal(err)
	}
	return keys
}

// gateStore blocks Create of keys containing a marker until released.
type gateStore struct {
	objectstore.Store
	mu      sync.Mutex
	gates   map[string]chan struct{}
	entered chan string
}

func newGateStore(s objectstore.Store) *gateStore {
	return &gateStore{Store: s, gates: map[string]chan struct{}{}, entered: make(chan string, 16)}
}

func (g *gateStore) hold(marker string) func() {
	ch := make(chan struct{})
	g.mu.Lock()
	g.gates[marker] = ch
	g.mu.Unlock()
	return func() { close(ch) }
}

func (g *gateStore) Create(ctx context.Context, key string, data []byte) error {
	g.mu.Lock()
	var wait chan struct{}
	for m, ch := range g.gates {
		if strings.Contains(key, m) {
			wait = ch
		}
	}
	g.mu.Unlock()
	if wait != nil {
		g.entered <- key
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return g.Store.Create(ctx, key, data)
}

// commitProto parses req with NewRequest and commits it, as the API does.
func commitProto(ctx context.Context, c *Committer, req *coordpb.CommitSegmentManifestRequest) (*coordpb.CommitSegmentManifestResponse, error) {
	r, err := NewRequest(req)
	if err != nil {
		return nil, err
	}
	return c.Commit(ctx, r)
}

// commitBatchProto parses a batch with NewBatch and commits it, as the API
// does.
func commitBatchProto(ctx context.Context, c *Committer, reqs []*coordpb.CommitSegmentManifestRequest, requestID string) ([]*coordpb.CommitSegmentManifestResponse, error) {
	b, err := NewBatch(&coordpb.CommitSegmentManifestBatchRequest{Commits: reqs, RequestId: requestID})
	if err != nil {
		return nil, err
	}
	return c.CommitBatch(ctx, b)
}

func wantClass(t *testing.T, err error, class string) {
	t.Helper()
	if got := Class(err); got != class {
		t.Fatalf("error %v has class %s, want %s", err, got, class)
	}
}

var errTest = errors.New("test: proposal failed")
