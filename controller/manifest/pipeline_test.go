package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/testutil"
)

func newTestMetrics(t *testing.T) *Metrics {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func statKeys(rev *coordpb.ManifestRevision) []string {
	var out []string
	for _, s := range rev.Stats {
		out = append(out, s.Key)
	}
	return out
}

// Many concurrent commits on one segment, against a leader whose log
// takes a round per command: each is prepared and queued while its
// predecessors are in flight (more than one command in flight, counted
// as pipelined), all succeed with consecutive versions, and the final
// revision holds every mutation.
func TestPipelinedCommitsOnOneSegment(t *testing.T) {
	m := newTestMetrics(t)
	f, p := newPipeFixture(t, Config{Metrics: m}, 2*time.Millisecond)
	f.create(5)
	const workers, each = 16, 4
	ctx := f.l.Deadline()
	var wg sync.WaitGroup
	versions := make(chan int64, workers*each)
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				req := statsReq(5, fmt.Sprintf("k%d-%d", w, i), fmt.Sprintf("f%d-%d", w, i))
				req.RequestId = fmt.Sprintf("r%d-%d", w, i)
				out, err := commitProto(ctx, f.c, req)
				if err != nil {
					errs <- err
					return
				}
				versions <- out.Version
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(versions)
	for err := range errs {
		t.Fatalf("commit: %v", err)
	}
	got := slices.Sorted(func(yield func(int64) bool) {
		for v := range versions {
			if !yield(v) {
				return
			}
		}
	})
	for i, v := range got {
		if v != int64(i+2) {
			t.Fatalf("versions %v, want 2..%d each once", got, workers*each+1)
		}
	}
	if v := f.version(5); v != workers*each+1 {
		t.Fatalf("pointer at %d, want %d", v, workers*each+1)
	}
	if keys := statKeys(f.revision(5)); len(keys) != workers*each {
		t.Fatalf("final revision has %d stats keys, want %d: %v", len(keys), workers*each, keys)
	}
	if n := p.maxInFlight(); n < 2 {
		t.Fatalf("at most %d command in flight: nothing was pipelined", n)
	}
	if n := promtest.ToFloat64(m.Pipelined); n < 1 {
		t.Fatalf("coordd_manifest_pipelined_total = %v, want > 0", n)
	}
	if objs := f.objects(); len(objs) != workers*each+1 {
		t.Fatalf("%d revisions, want %d (no orphans)", len(objs), workers*each+1)
	}
}

// A commit built on the tail of a predecessor that Apply refuses is
// refused too (its base never became the pointer), and retried from the
// applied state transparently: it succeeds, its request ID answers a
// repeat with the retry's result, and the refused predecessor's mutation
// is published nowhere.
func TestPipelinedSuccessorOfARefusedCommitIsRetried(t *testing.T) {
	m, f, p, h := startHeldCommit(t)
	ctx, release, queued, aErr := h.ctx, h.release, h.queued, h.aErr
	type result struct {
		out *coordpb.CommitSegmentManifestResponse
		err error
	}
	bRes := make(chan result, 1)
	bReq := statsReq(5, "b", "b")
	bReq.RequestId = "b-1"
	go func() { out, err := commitProto(ctx, f.c, bReq); bRes <- result{out, err} }()
	p.waitQueued(t, queued+2)
	if n := promtest.ToFloat64(m.Pipelined); n != 1 {
		t.Fatalf("pipelined = %v before the predecessor applied, want 1", n)
	}

	// Another writer moves the pointer before either applies: a's base
	// (v1) is gone, so a is refused, and b was built on a's v2.
	other := commands.ManifestPointer{Base: commands.ManifestBase(testColl, 1, 5), Version: 10}
	data, err := Encode(&coordpb.ManifestRevision{FormatVersion: FormatVersion, SegmentId: 5, Version: 10,
		Stats: []*coordpb.ManifestStatsEntry{{Key: "other", Files: []string{statsKey(5, "other")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Create(ctx, other.Key(), data); err != nil {
		t.Fatal(err)
	}
	f.l.MustPropose(t, &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{{SegmentId: 5, Next: other.String(), Prepared: true}}})
	release()

	var stale *StaleError
	if err := <-aErr; !errors.As(err, &stale) {
		t.Fatalf("a (built on the applied state, whose base moved) = %v, want stale", err)
	}
	b := <-bRes
	if b.err != nil {
		t.Fatalf("b (built on a's tail) = %v, want success after a retry", b.err)
	}
	if b.out.Version != 11 {
		t.Fatalf("b published version %d, want 11 (above the other publication and b's orphan)", b.out.Version)
	}
	if keys := statKeys(f.revision(5)); !slices.Equal(keys, []string{"b", "other"}) {
		t.Fatalf("published stats %v, want b over the other publication", keys)
	}
	if n := promtest.ToFloat64(m.Retries.WithLabelValues("base_moved")); n != 1 {
		t.Fatalf("retries{base_moved} = %v, want 1", n)
	}
	// A repeat of b's request is answered by the retry's result.
	again, err := commitProto(ctx, f.c, bReq)
	if err != nil || again.Version != 11 {
		t.Fatalf("repeat of b = %v, %v; want version 11 again", again, err)
	}
	if v := f.version(5); v != 11 {
		t.Fatalf("pointer at %d after the repeat, want 11", v)
	}
}

// A pending tail is built on only in the term it was proposed in: after a
// term change the next commit builds on the applied state, so it
// publishes although the old term's command in flight is fenced.
func TestTermChangeDiscardsTheTail(t *testing.T) {
	m, f, p, h := startHeldCommit(t) // a's tail (v2) is pending in term 1
	ctx, release, queued, aErr := h.ctx, h.release, h.queued, h.aErr

	f.l.Establish(t, 2) // a new term: a, decided in term 1, is fenced
	bErr := make(chan error, 1)
	var bOut atomic.Int64
	go func() {
		out, err := commitProto(ctx, f.c, statsReq(5, "b", "b"))
		if err == nil {
			bOut.Store(out.Version)
		}
		bErr <- err
	}()
	p.waitQueued(t, queued+2)
	release()
	var stale *StaleError
	if err := <-aErr; !errors.As(err, &stale) {
		t.Fatalf("a (decided in the old term) = %v, want stale", err)
	}
	if err := <-bErr; err != nil {
		t.Fatalf("b = %v, want success on the applied state", err)
	}
	if v := bOut.Load(); v != 3 {
		t.Fatalf("b published version %d, want 3 (above a's orphan)", v)
	}
	if n := promtest.ToFloat64(m.Pipelined); n != 0 {
		t.Fatalf("pipelined = %v: b built on the old term's tail", n)
	}
	if keys := statKeys(f.revision(5)); !slices.Equal(keys, []string{"b"}) {
		t.Fatalf("published stats %v, want only b", keys)
	}
}

// Batches and single commits on the same segments pipeline with each
// other: all succeed, none stale, every segment's versions are
// consecutive and its final revision holds every mutation.
func TestBatchRacingPipelinedCommits(t *testing.T) {
	m := newTestMetrics(t)
	f, _ := newPipeFixture(t, Config{Metrics: m}, time.Millisecond)
	segs := []int64{5, 6, 7}
	for _, s := range segs {
		f.create(s)
	}
	ctx := f.l.Deadline()
	const singles, batches, each = 6, 3, 4
	var wg sync.WaitGroup
	errs := make(chan error, (singles+batches)*each)
	for w := range singles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seg := segs[w%len(segs)]
			for i := range each {
				req := statsReq(seg, fmt.Sprintf("s%d-%d", w, i), fmt.Sprintf("s%d-%d", w, i))
				req.RequestId = fmt.Sprintf("s%d-%d", w, i)
				if _, err := commitProto(ctx, f.c, req); err != nil {
					errs <- fmt.Errorf("single %d/%d on %d: %w", w, i, seg, err)
				}
			}
		}()
	}
	for w := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				var reqs []*coordpb.CommitSegmentManifestRequest
				for _, seg := range segs {
					reqs = append(reqs, statsReq(seg, fmt.Sprintf("b%d-%d", w, i), fmt.Sprintf("b%d-%d", w, i)))
				}
				if _, err := commitBatchProto(ctx, f.c, reqs, fmt.Sprintf("b%d-%d", w, i)); err != nil {
					errs <- fmt.Errorf("batch %d/%d: %w", w, i, err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, seg := range segs {
		want := batches * each
		for w := range singles {
			if segs[w%len(segs)] == seg {
				want += each
			}
		}
		if v := f.version(seg); v != int64(want+1) {
			t.Fatalf("segment %d at version %d, want %d", seg, v, want+1)
		}
		if keys := statKeys(f.revision(seg)); len(keys) != want {
			t.Fatalf("segment %d: %d stats keys, want %d", seg, len(keys), want)
		}
	}
	if n := promtest.ToFloat64(m.StaleRejections); n != 0 {
		t.Fatalf("%v stale rejections, want none", n)
	}
}

// countingStore counts Get calls.
type countingStore struct {
	objectstore.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key)
}

// The committer keeps the revision it just wrote: the next commit on the
// segment reads nothing from the store (also without pipelining, on the
// plain fake), and the kept content is exactly what the store holds.
func TestCommitBuildsOnTheCachedRevision(t *testing.T) {
	f := newFixture(t, Config{})
	cs := &countingStore{Store: f.store}
	f.c = New(f.l, Config{Store: cs})
	f.create(5)
	ctx := context.Background()
	for i := range 3 {
		if _, err := commitProto(ctx, f.c, statsReq(5, fmt.Sprintf("k%d", i), "f")); err != nil {
			t.Fatal(err)
		}
	}
	if n := cs.gets.Load(); n != 0 {
		t.Fatalf("%d store reads for commits on a cached revision, want 0", n)
	}
	tl := f.c.tails.segs[5].tail
	if tl == nil || tl.pending || tl.ptr.Version != 4 {
		t.Fatalf("tail %+v, want settled at version 4", tl)
	}
	data, err := f.store.Get(ctx, tl.ptr.Key())
	if err != nil {
		t.Fatal(err)
	}
	stored, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(stored, tl.rev) {
		t.Fatalf("cached %v, stored %v", tl.rev, stored)
	}
	// A committer without the cache (a new leader) reads the revision.
	f.c.tails = newTailTable()
	if _, err := commitProto(ctx, f.c, statsReq(5, "cold", "f")); err != nil {
		t.Fatal(err)
	}
	if n := cs.gets.Load(); n != 1 {
		t.Fatalf("%d store reads without a cache, want 1", n)
	}
}

// attemptRequestID: the first attempt uses the caller's ID; retries use
// distinct derived IDs within the length bound.
func TestAttemptRequestID(t *testing.T) {
	if got := attemptRequestID("r", 1); got != "r" {
		t.Fatalf("first attempt %q", got)
	}
	if got := attemptRequestID("", 2); got != "" {
		t.Fatalf("no ID: %q", got)
	}
	long := string(make([]byte, 128))
	seen := map[string]bool{}
	for _, id := range []string{"r", long} {
		for n := 2; n <= maxAttempts; n++ {
			got := attemptRequestID(id, n)
			if len(got) > 128 || seen[got] || got == id {
				t.Fatalf("attempt %d of %q: %q", n, id, got)
			}
			seen[got] = true
		}
	}
}

// A repeat of a request (a client retrying after an unknown outcome)
// that arrives while the first call's publication is in flight waits for
// that call, proposes nothing of its own, and gets the same answer.
// Without the request gate it took the segment lock (released once the
// first was queued), built a second revision and proposed it under the
// same ID; if the first call was then retried under a derived ID, the
// FSM refused the repeat as a reused ID and no recorded answer was there
// to replace the refusal.
func TestRepeatedRequestWaitsForTheFirstCall(t *testing.T) {
	f, p := newPipeFixture(t, Config{}, 0)
	f.create(5)
	ctx := f.l.Deadline()
	release := p.hold()
	queued := p.queued.Load()
	type result struct {
		out *coordpb.CommitSegmentManifestResponse
		err error
	}
	req := statsReq(5, "repeated", "frepeated")
	req.RequestId = "client-retry-1"
	first, repeat := make(chan result, 1), make(chan result, 1)
	go func() { out, err := commitProto(ctx, f.c, req); first <- result{out, err} }()
	p.waitQueued(t, queued+1)
	go func() {
		out, err := commitProto(ctx, f.c, proto.Clone(req).(*coordpb.CommitSegmentManifestRequest))
		repeat <- result{out, err}
	}()
	testutil.Never(t, "the repeat proposed while the first call was in flight", 50*time.Millisecond,
		func() bool { return p.queued.Load() > queued+1 })
	release()
	a, b := <-first, <-repeat
	if a.err != nil || b.err != nil {
		t.Fatalf("first call %v, repeat %v", a.err, b.err)
	}
	if a.out.Version != b.out.Version {
		t.Fatalf("the two calls of one request got versions %d and %d", a.out.Version, b.out.Version)
	}
	if got := p.queued.Load() - queued; got != 1 {
		t.Fatalf("%d proposals for one request, want 1", got)
	}
}
