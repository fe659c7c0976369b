package manifest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func TestCommitSegmentManifestSerializesSameSegment(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	ctx := context.Background()
	for v := int64(2); v <= 3; v++ {
		resp, err := commitProto(ctx, f.c, statsReq(5, fmt.Sprintf("k%d", v), "f"))
		if err != nil || resp.Version != v {
			t.Fatalf("commit %d: %v %v", v, resp, err)
		}
	}
	rev := f.revision(5)
	if rev.Version != 3 || len(rev.Stats) != 2 || len(rev.ColumnGroups) != 1 {
		t.Fatalf("revision %v", rev)
	}
	// Concurrent committers of one segment queue: each builds on the
	// previous publication, so every mutation survives.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := commitProto(ctx, f.c, statsReq(5, fmt.Sprintf("c%d", i), "f")); err != nil {
				t.Errorf("concurrent commit %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if rev := f.revision(5); rev.Version != 11 || len(rev.Stats) != 10 {
		t.Fatalf("after 8 concurrent commits: version %d, %d stats keys", rev.Version, len(rev.Stats))
	}
}

// The pointer is published by the command, never before: while the
// proposal is in flight the revision exists but readers see the old
// version, and a proposal that fails leaves the old version visible.
func TestCommitSegmentManifestPublishesOnlyAfterCatalogSuccess(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	f.l.SetBeforePropose(func(body proto.Message) error {
		if _, ok := body.(*logpb.CommitSegmentManifests); !ok {
			return nil
		}
		if v := f.version(5); v != 1 {
			t.Errorf("pointer at %d before the command committed", v)
		}
		if _, err := f.store.Get(context.Background(), commands.ManifestKey(commands.ManifestBase(testColl, 1, 5), 2)); err != nil {
			t.Errorf("revision not written before proposing: %v", err)
		}
		return errTest
	})
	_, err := commitProto(context.Background(), f.c, statsReq(5, "k", "f"))
	if !errors.Is(err, errTest) || f.version(5) != 1 {
		t.Fatalf("failed proposal: %v, version %d", err, f.version(5))
	}
	f.l.SetBeforePropose(nil)
	// The orphan (v2) is stepped over, never overwritten, and deleted once
	// v3 is published (nothing can reference it any more).
	resp, err := commitProto(context.Background(), f.c, statsReq(5, "k2", "f"))
	if err != nil || resp.Version != 3 || len(f.objects()) != 2 {
		t.Fatalf("next commit: %v %v, objects %v", resp, err, f.objects())
	}
	if rev := f.revision(5); len(rev.Stats) != 1 || rev.Stats[0].Key != "k2" {
		t.Fatalf("v3 built on the orphan: %v", rev)
	}
}

func TestCommitSegmentManifestFailsStaleWhenPointerAdvancesDuringManifestIO(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	base := commands.ManifestBase(testColl, 1, 5)
	f.l.SetBeforeNextApply(func(body proto.Message) bool {
		if _, ok := body.(*logpb.CommitSegmentManifests); !ok {
			return false
		}
		// Another publisher (a single-writer path) moves the pointer.
		f.l.MustPropose(t, &logpb.CommitSegmentManifests{Publishes: []*logpb.ManifestPublish{{SegmentId: 5,
			Next: commands.ManifestPointer{Base: base, Version: 7}.String(), Prepared: true}}})
		return true
	})
	_, err := commitProto(context.Background(), f.c, statsReq(5, "k", "f"))
	var stale *StaleError
	if !errors.As(err, &stale) || stale.Expected != 1 || stale.Current != 7 {
		t.Fatalf("got %v, want stale expected 1 current 7", err)
	}
	wantClass(t, err, "stale")
	if f.version(5) != 7 {
		t.Fatalf("version %d", f.version(5))
	}
}

func TestCommitSegmentManifestDoesNotSerializeDifferentSegmentsDuringManifestIO(t *testing.T) {
	f := newFixture(t, Config{})
	gs := newGateStore(f.store)
	f.c.cfg.Store = gs
	f.create(5)
	f.create(6)
	release := gs.hold("/5/manifest-")
	done := make(chan error, 1)
	go func() {
		_, err := commitProto(context.Background(), f.c, statsReq(5, "k", "f"))
		done <- err
	}()
	<-gs.entered // segment 5 is inside its manifest I/O, holding its lock
	if _, err := commitProto(context.Background(), f.c, statsReq(6, "k", "f")); err != nil {
		t.Fatalf("segment 6 waited for or failed behind segment 5: %v", err)
	}
	if f.version(6) != 2 || f.version(5) != 1 {
		t.Fatal("unexpected versions")
	}
	release()
	if err := <-done; err != nil || f.version(5) != 2 {
		t.Fatalf("segment 5: %v", err)
	}
}

func TestCommitSegmentManifestRejectsDroppedSegmentAsNotFound(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	drop := statsReq(5, "k", "f")
	drop.Catalog = &coordpb.CatalogMutation{State: "Dropped"}
	if _, err := commitProto(context.Background(), f.c, drop); err != nil {
		t.Fatal(err)
	}
	_, err := commitProto(context.Background(), f.c, statsReq(5, "k2", "f"))
	wantClass(t, err, "not_found")
	_, err = commitProto(context.Background(), f.c, statsReq(77, "k2", "f"))
	wantClass(t, err, "not_found")
	if f.version(5) != 2 {
		t.Fatal("dropped segment's pointer moved")
	}
}

// A commit decided by a leader that has since been replaced is refused by
// Apply, and its revision stays an orphan.
func TestDeposedLeaderCommitIsRefused(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	f.l.SetBeforeNextApply(func(body proto.Message) bool {
		if _, ok := body.(*logpb.CommitSegmentManifests); !ok {
			return false
		}
		f.l.Establish(t, 2)
		return true
	})
	_, err := commitProto(context.Background(), f.c, statsReq(5, "k", "f"))
	wantClass(t, err, "stale")
	if f.version(5) != 1 {
		t.Fatal("deposed decision published")
	}
}

func TestCommitSegmentManifestExpectedManifest(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	base := commands.ManifestBase(testColl, 1, 5)
	// A revision prepared elsewhere (a worker) at version 4.
	rev := &coordpb.ManifestRevision{FormatVersion: FormatVersion, SegmentId: 5, Version: 4}
	data, _ := Encode(rev)
	if err := f.store.Create(context.Background(), commands.ManifestKey(base, 4), data); err != nil {
		t.Fatal(err)
	}
	prep := func(v, expected int64) *coordpb.CommitSegmentManifestRequest {
		return &coordpb.CommitSegmentManifestRequest{SegmentId: 5, ExpectedVersion: &expected,
			Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_PublishPrepared{PublishPrepared: &coordpb.PublishPreparedManifest{Version: v}}}}
	}
	_, err := commitProto(context.Background(), f.c, prep(4, 3))
	var stale *StaleError
	if !errors.As(err, &stale) || stale.Expected != 3 || stale.Current != 1 {
		t.Fatalf("wrong expected: %v", err)
	}
	if resp, err := commitProto(context.Background(), f.c, prep(4, 1)); err != nil || resp.Version != 4 {
		t.Fatalf("prepared publish: %v %v", resp, err)
	}
	if resp, err := commitProto(context.Background(), f.c, prep(4, 4)); err != nil || resp.Version != 4 {
		t.Fatalf("idempotent retry: %v %v", resp, err)
	}
	_, err = commitProto(context.Background(), f.c, prep(9, 4)) // no such object
	wantClass(t, err, "invalid")
}

// Bad input: a clear invalid error, nothing written, nothing proposed.
func TestCommitSegmentManifestBadInputChangesNothing(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	applied := len(f.l.Applied())
	one := int64(1)
	add := func(ix ...*coordpb.ManifestIndexEntry) *coordpb.ManifestMutation {
		return &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddIndexes{AddIndexes: &coordpb.AddIndexes{Indexes: ix}}}
	}
	for name, req := range map[string]*coordpb.CommitSegmentManifestRequest{
		"zero segment":        {Mutation: statsReq(5, "k").Mutation},
		"no mutation":         {SegmentId: 5},
		"expected structured": {SegmentId: 5, Mutation: statsReq(5, "k", "f").Mutation, ExpectedVersion: &one},
		"empty stats key":     statsReq(5, "", "f"),
		"900 KB stats key":    statsReq(5, strings.Repeat("k", 900_000), "f"), // probe L13: every later revision would carry it
		"stats key with a C1": statsReq(5, "k\u0085", "f"),
		"empty file":          statsReq(5, "k", ""),
		"create twice":        {SegmentId: 5, Mutation: createReq(5).Mutation},
		"bad state":           {SegmentId: 5, Mutation: statsReq(5, "k", "f").Mutation, Catalog: &coordpb.CatalogMutation{State: "Sealed"}},
		"unmatched upsert": {SegmentId: 5, Mutation: statsReq(5, "k", "f").Mutation,
			Catalog: &coordpb.CatalogMutation{IndexUpserts: []*coordpb.ManifestIndexEntry{{BuildId: 3, IndexId: 4}}}},
		"two upserts": {SegmentId: 5, Mutation: add(&coordpb.ManifestIndexEntry{BuildId: 3, IndexId: 4}, &coordpb.ManifestIndexEntry{BuildId: 5, IndexId: 4}),
			Catalog: &coordpb.CatalogMutation{IndexUpserts: []*coordpb.ManifestIndexEntry{{BuildId: 3, IndexId: 4}, {BuildId: 5, IndexId: 4}}}},
		"unmatched removal": {SegmentId: 5, Mutation: statsReq(5, "k", "f").Mutation, Catalog: &coordpb.CatalogMutation{IndexRemoves: []int64{3}}},
		"bad level": {SegmentId: 9, Mutation: createReq(9).Mutation, Catalog: &coordpb.CatalogMutation{NewSegment: &coordpb.ManifestNewSegment{
			CollectionId: testColl, Vchannel: testVChannel, Level: "L0", NumOfRows: 1}}},
		"prepared bad base": {SegmentId: 5, Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_PublishPrepared{
			PublishPrepared: &coordpb.PublishPreparedManifest{Version: 2, BasePath: "../etc"}}}},
		"request ID too long": {SegmentId: 5, Mutation: statsReq(5, "k", "f").Mutation, RequestId: strings.Repeat("r", vocab.MaxRequestIDBytes+1)},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := commitProto(context.Background(), f.c, req)
			wantClass(t, err, "invalid")
			// The request-ID limit has one check and one error (vocab's).
			if req.RequestId != "" && !errors.Is(err, vocab.ErrInvalid) {
				t.Fatalf("request ID over the limit: %v, want vocab.ErrInvalid", err)
			}
		})
	}
	long := strings.Repeat("r", vocab.MaxRequestIDBytes+1)
	if _, err := commitBatchProto(context.Background(), f.c, []*coordpb.CommitSegmentManifestRequest{statsReq(5, "k", "f")}, long); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("batch with a request ID over the limit: %v, want commands.ErrInvalid", err)
	}
	if len(f.l.Applied()) != applied || len(f.objects()) != 1 || f.version(5) != 1 {
		t.Fatalf("bad input changed something: %d commands, objects %v", len(f.l.Applied())-applied, f.objects())
	}
}

func TestCommitSegmentManifestRemovesSegmentIndexWithRetraction(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	ctx := context.Background()
	idxFile := "index_files/40/1/1/5/0"
	if err := f.store.Put(ctx, idxFile, []byte("index bytes")); err != nil {
		t.Fatal(err)
	}
	entry := &coordpb.ManifestIndexEntry{BuildId: 40, IndexId: 41, FieldId: 101, Files: []string{idxFile}}
	_, err := commitProto(ctx, f.c, &coordpb.CommitSegmentManifestRequest{SegmentId: 5,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddIndexes{AddIndexes: &coordpb.AddIndexes{Indexes: []*coordpb.ManifestIndexEntry{entry}}}},
		Catalog:  &coordpb.CatalogMutation{IndexUpserts: []*coordpb.ManifestIndexEntry{entry}}})
	if err != nil || len(f.l.State().SegmentIndexes(5)) != 1 || len(f.revision(5).Indexes) != 1 {
		t.Fatalf("index publication: %v", err)
	}
	// Retraction: bytes first, then DropIndexes and the record together.
	f.l.SetBeforePropose(func(body proto.Message) error {
		if _, err := f.store.Get(ctx, idxFile); err == nil {
			t.Error("index files still there when the retraction is proposed")
		}
		if len(f.l.State().SegmentIndexes(5)) != 1 {
			t.Error("record removed before the command")
		}
		return nil
	})
	_, err = commitProto(ctx, f.c, &coordpb.CommitSegmentManifestRequest{SegmentId: 5,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_DropIndexes{DropIndexes: &coordpb.DropIndexes{BuildIds: []int64{40}}}},
		Catalog:  &coordpb.CatalogMutation{IndexRemoves: []int64{40}}})
	if err != nil || len(f.l.State().SegmentIndexes(5)) != 0 || len(f.revision(5).Indexes) != 0 {
		t.Fatalf("retraction: %v", err)
	}
}

func TestCommitHonoursCancellationWhileWaitingForTheLock(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	if err := f.c.locks.lock(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := commitProto(ctx, f.c, statsReq(5, "k", "f"))
	wantClass(t, err, "canceled")
	f.c.locks.unlock(5)
	if _, err := commitProto(context.Background(), f.c, statsReq(5, "k", "f")); err != nil {
		t.Fatal(err)
	}
}
