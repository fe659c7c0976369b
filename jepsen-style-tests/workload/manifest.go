package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// Manifest is the manifest-commit workload: a few StorageV3 segments,
// concurrent committers per segment (each commit adds a stats key unique
// to it, so the final revision shows which commits were published) and
// readers of the published pointer and revision. After the heal it runs an
// orphan collection pass and reads every segment again: the collector must
// not have removed anything a pointer references, and every acknowledged
// commit must be in the final revision. The members need an object store
// (Scenario.ObjectStore).
type Manifest struct {
	Segments   int // default 3
	Committers int // default 4
	Readers    int // default 2
	// LinTimeout bounds porcupine (default 2 minutes).
	LinTimeout time.Duration
	// InjectStaleRead, for testing the tests only: every InjectStaleRead-th
	// ok read of the first reader records that reader's first read of the
	// segment instead of the real answer, as a deposed leader serving an
	// old pointer would. 0 disables it.
	InjectStaleRead int
}

func (m *Manifest) defaults() {
	if m.Segments <= 0 {
		m.Segments = 3
	}
	if m.Committers <= 0 {
		m.Committers = 4
	}
	if m.Readers <= 0 {
		m.Readers = 2
	}
	if m.LinTimeout <= 0 {
		m.LinTimeout = 2 * time.Minute
	}
}

func (m *Manifest) Name() string { return "manifest" }

// Clients: the committers, the readers and the final reader.
func (m *Manifest) Clients() int { m.defaults(); return m.Committers + m.Readers + 1 }

func (m *Manifest) Run(ctx context.Context, env Env) error {
	m.defaults()
	cl, err := client.New(ctx, ClientConfig(env.Endpoints(0)))
	if err != nil {
		return err
	}
	defer cl.Close()
	coll := int64(2000 + env.Seed%100000)
	segs, err := m.setup(ctx, cl, coll)
	if err != nil || len(segs) == 0 {
		return err // ctx ended before the segments existed: nothing to check
	}
	var wg sync.WaitGroup
	for i := 0; i < m.Committers+m.Readers; i++ {
		id := env.ClientBase + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.New(ctx, ClientConfig(env.Endpoints(i%env.Members)))
			if err != nil {
				return
			}
			defer c.Close()
			rng := rand.New(rand.NewPCG(env.Seed, uint64(i)))
			var mangle func(int64, checker.ManifestReadOut) checker.ManifestReadOut
			if i == m.Committers && m.InjectStaleRead > 0 {
				mangle = staleReads(m.InjectStaleRead)
			}
			for n := 0; ctx.Err() == nil; n++ {
				seg := segs[rng.IntN(len(segs))]
				if i < m.Committers {
					commitOnce(ctx, c, env.Recorder, id, coll, seg, fmt.Sprintf("c%d-%d", id, n))
				} else {
					readOnce(ctx, c, env.Recorder, id, checker.FManifestRead, seg, mangle)
					sleepCtx(ctx, time.Duration(rng.IntN(20))*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()

	// The run is over and the cluster healed: read every segment, collect
	// orphans, read again.
	fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	fin, err := client.New(fctx, client.Config{Endpoints: env.Endpoints(0), RequestTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer fin.Close()
	id := env.ClientBase + m.Committers + m.Readers
	for _, seg := range segs {
		readFinal(fctx, fin, env.Recorder, id, seg)
	}
	if _, err := fin.CollectManifestOrphans(fctx, false); err != nil {
		return fmt.Errorf("manifest: orphan collection after the run: %w", err)
	}
	for _, seg := range segs {
		readFinal(fctx, fin, env.Recorder, id, seg)
	}
	return nil
}

// setup creates the collection's VChannel and the segments (each with a
// first revision), retrying through faults; a retried create carries the
// same request ID, so it answers from the first attempt.
func (m *Manifest) setup(ctx context.Context, cl *client.Client, coll int64) ([]int64, error) {
	var vch string
	var first uint64
	for ctx.Err() == nil {
		vchs, err := cl.AllocVirtualChannels(ctx, coll, 1, fmt.Sprintf("manifest-workload-%d", coll))
		if err == nil {
			vch = vchs[0]
			if first, _, err = cl.AllocID(ctx, uint32(m.Segments)); err == nil {
				break
			}
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	var segs []int64
	for i := 0; i < m.Segments && ctx.Err() == nil; i++ {
		seg := int64(first) + int64(i)
		req := &coordpb.CommitSegmentManifestRequest{SegmentId: seg, RequestId: fmt.Sprintf("manifest-workload-create-%d", seg),
			Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
				ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: []string{fmt.Sprintf("insert_log/%d/1/%d/100/1", coll, seg)}}}}}},
			Catalog: &coordpb.CatalogMutation{NewSegment: &coordpb.ManifestNewSegment{CollectionId: coll, PartitionId: 1, Vchannel: vch, NumOfRows: 100}}}
		for ctx.Err() == nil {
			if _, err := cl.CommitSegmentManifest(ctx, req); err == nil {
				segs = append(segs, seg)
				break
			}
			if got, err := cl.GetSegmentManifest(ctx, seg); err == nil && got.Version > 0 {
				segs = append(segs, seg)
				break
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	return segs, nil
}

// commitOnce commits one stats key; its file lies under the segment's
// stats directory (coordd refuses keys outside the segment's directories).
func commitOnce(ctx context.Context, c *client.Client, rec *history.Recorder, id int, coll, seg int64, key string) {
	p := rec.Invoke(id, checker.FManifestCommit, checker.ManifestCommitIn{Segment: seg, Key: key})
	resp, err := c.CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: seg,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
			Stats: []*coordpb.ManifestStatsEntry{{Key: key, Files: []string{fmt.Sprintf("stats_log/%d/1/%d/%s", coll, seg, key)}}}}}}})
	switch Classify(err) {
	case history.Ok:
		p.Ok(checker.ManifestCommitOut{Version: resp.Version})
	case history.Fail:
		p.Fail(err)
	default:
		p.Info(err)
	}
}

// staleReads is the InjectStaleRead mangler: it remembers each segment's
// first read and records it again instead of every n-th ok read.
func staleReads(n int) func(int64, checker.ManifestReadOut) checker.ManifestReadOut {
	first := map[int64]checker.ManifestReadOut{}
	k := 0
	return func(seg int64, out checker.ManifestReadOut) checker.ManifestReadOut {
		old, ok := first[seg]
		if !ok {
			first[seg] = out
			return out
		}
		if k++; k%n == 0 {
			return old
		}
		return out
	}
}

// readOnce reads a segment's pointer and decoded revision; a read is ok
// only if the revision the pointer names could be decoded. mangle (tests
// of the tests only) may replace what is recorded.
func readOnce(ctx context.Context, c *client.Client, rec *history.Recorder, id int, f string, seg int64,
	mangle func(int64, checker.ManifestReadOut) checker.ManifestReadOut) error {
	p := rec.Invoke(id, f, checker.ManifestReadIn{Segment: seg})
	got, err := c.GetSegmentManifest(ctx, seg)
	if err == nil && got.Version > 0 && got.GetRevision().GetVersion() != got.Version {
		// A pointer whose revision cannot be read: never ok (a final read
		// that keeps failing leaves the run without its final state, which
		// the checker reports).
		err = fmt.Errorf("segment %d: pointer at version %d, revision read %d", seg, got.Version, got.GetRevision().GetVersion())
		p.Info(err)
		return err
	}
	if err != nil {
		p.Info(err)
		return err
	}
	keys := []string{}
	for _, s := range got.GetRevision().GetStats() {
		keys = append(keys, s.Key)
	}
	sort.Strings(keys)
	out := checker.ManifestReadOut{Version: got.Version, Keys: keys}
	if mangle != nil {
		out = mangle(seg, out)
	}
	p.Ok(out)
	return nil
}

// readFinal retries a final read until it succeeds or ctx ends.
func readFinal(ctx context.Context, c *client.Client, rec *history.Recorder, id int, seg int64) {
	for ctx.Err() == nil {
		if readOnce(ctx, c, rec, id, checker.FManifestFinal, seg, nil) == nil {
			return
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func (m *Manifest) Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result {
	m.defaults()
	html := ""
	if dir != "" {
		html = filepath.Join(dir, "manifest-linearizability.html")
	}
	return []checker.Result{checker.ManifestLinearizable(ops, m.LinTimeout, html, notes), checker.ManifestAcknowledgedPresent(ops)}
}
