package manifest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/objectstore"
)

// agedStore is a store whose listing reports, for each object the test
// created through it, the fake clock's time at its creation as its
// modification time, so a test can lay out old and young revisions in any
// order of version.
type agedStore struct {
	objectstore.Store
	clock clockwork.Clock
	mu    sync.Mutex
	born  map[string]time.Time
}

func (s *agedStore) Create(ctx context.Context, key string, data []byte) error {
	if err := s.Store.Create(ctx, key, data); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.born[key] = s.clock.Now()
	return nil
}

func (s *agedStore) ListInfo(ctx context.Context, prefix string) ([]objectstore.ObjectInfo, error) {
	objs, err := s.Store.ListInfo(ctx, prefix)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range objs {
		if t, ok := s.born[o.Key]; ok {
			objs[i].ModTime = t
		}
	}
	return objs, err
}

// TestCollectOrphansDecidesByAgeNotPosition: old and young orphans
// interleaved by version on one base. A pass condemns a contiguous range
// of versions (docs/semantics.md#manifest-orphans), so it removes only the
// old ones below a base's first young orphan, and keeps every version
// above it, old or young, until that one has aged; a base whose first
// orphan is young loses nothing. Once every orphan is past the grace
// period, all of them go, and the published revision stays.
func TestCollectOrphansDecidesByAgeNotPosition(t *testing.T) {
	ctx := context.Background()
	clock := clockwork.NewFakeClockAt(time.Now())
	dir, err := objectstore.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	store := &agedStore{Store: dir, clock: clock, born: map[string]time.Time{}}
	const grace = time.Minute
	f := newFixture(t, Config{Clock: clock, GCGrace: grace, Store: store})
	f.create(5)
	if _, err := commitProto(ctx, f.c, statsReq(5, "k", "f")); err != nil {
		t.Fatal(err)
	}
	published := commands.ManifestBase(testColl, 1, 5) // at version 2
	gone := commands.ManifestBase(testColl, 1, 77)     // no segment 77
	youngFirst := commands.ManifestBase(testColl, 1, 78)
	key := commands.ManifestKey
	old := []string{key(published, 3), key(published, 5), key(published, 7), key(gone, 1), key(gone, 3), key(youngFirst, 2)}
	young := []string{key(published, 4), key(published, 6), key(gone, 2), key(youngFirst, 1)}
	create := func(keys []string) {
		for _, k := range keys {
			if err := store.Create(ctx, k, []byte("x")); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(old)
	clock.Advance(2 * grace)
	create(young)

	rep, err := f.c.CollectOrphans(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	wantRemoved := []string{key(published, 3), key(gone, 1)}
	slices.Sort(rep.Removed)
	slices.Sort(wantRemoved)
	if !slices.Equal(rep.Removed, wantRemoved) || rep.Young != len(young) {
		t.Fatalf("pass with young orphans interleaved: removed %v, young %d; want removed %v, young %d",
			rep.Removed, rep.Young, wantRemoved, len(young))
	}
	left := f.objects()
	for _, k := range append(slices.Clone(young), key(published, 5), key(published, 7), key(gone, 3), key(youngFirst, 2)) {
		if !slices.Contains(left, k) {
			t.Fatalf("%s is gone, though a younger revision lies at or below it; left %v", k, left)
		}
	}

	clock.Advance(2 * grace)
	if _, err := f.c.CollectOrphans(ctx, false); err != nil {
		t.Fatal(err)
	}
	pub := f.version(5)
	for _, k := range f.objects() {
		base, v, ok := commands.ParseManifestKey(k)
		if !ok || base != published || v > pub {
			t.Fatalf("once every orphan aged, %s was left (segment 5 publishes version %d); left %v", k, pub, f.objects())
		}
	}
	if !slices.Contains(f.objects(), key(published, pub)) {
		t.Fatalf("the published revision %d is gone: %v", pub, f.objects())
	}
}
