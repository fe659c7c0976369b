package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
)

// manifestCollection is the collection the manifest workload's segments
// belong to.
const manifestCollection = 4343

// manifestCell is one shape of the manifest commit workload.
type manifestCell struct {
	Name     string  `json:"name"`
	Callers  int     `json:"callers"`
	Segments int     `json:"segments"`
	Batch    int     `json:"batch"` // segments per call (1 = single commits)
	Calls    int     `json:"calls"`
	Errors   int     `json:"errors"`
	CallsSec float64 `json:"calls_per_sec"`
	SegsSec  float64 `json:"segment_commits_per_sec"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`
}

// manifestCommits measures CommitSegmentManifest (AddStats, one key per
// caller so revisions stay small) closed-loop: callers spread over 1,000
// segments, callers on one hot segment, and batch commits of 64 random
// segments per call (16 callers, whose random batches nearly always
// overlap, and one caller alone). Every commit is a revision write to the members'
// object store plus one raft command. The cells are printed to stderr; the
// result carries the first (spread) cell.
func manifestCommits(l *cluster.Launcher, callers int, duration time.Duration) (result, error) {
	const nsegs = 1000
	clients := make([]*client.Client, 8)
	for i := range clients {
		c, err := newClient(l)
		if err != nil {
			return result{}, err
		}
		defer c.Close()
		clients[i] = c
	}
	segs, err := manifestSetup(clients, nsegs)
	if err != nil {
		return result{}, err
	}
	var cells []manifestCell
	for _, shape := range []struct {
		name         string
		callers      int
		segs, batch  int
		segmentsUsed []int64
	}{
		{"spread", callers, nsegs, 1, segs},
		{"hot", callers, 1, 1, segs[:1]},
		{"batch64", callers / 4, nsegs, 64, segs},
		{"batch64-alone", 1, nsegs, 64, segs},
	} {
		cell := manifestRun(clients, shape.segmentsUsed, max(1, shape.callers), shape.batch, duration)
		cell.Name, cell.Segments = shape.name, shape.segs
		fmt.Fprintf(os.Stderr, "coordbench: manifest %s: %d callers, batch %d: %.0f calls/s (%.0f segment commits/s), p50 %.1f ms, p99 %.1f ms, %d errors\n",
			cell.Name, cell.Callers, cell.Batch, cell.CallsSec, cell.SegsSec, cell.P50ms, cell.P99ms, cell.Errors)
		cells = append(cells, cell)
	}
	if cells[0].Calls == 0 {
		return result{}, fmt.Errorf("manifest: no commit succeeded")
	}
	for _, c := range cells {
		fmt.Fprintf(os.Stderr, "coordbench: manifest cell %+v\n", c)
	}
	c := cells[0]
	return result{Clients: c.Callers, Ops: c.Calls, Errors: c.Errors, OpsPerSec: c.CallsSec, P50ms: c.P50ms, P99ms: c.P99ms}, nil
}

// manifestSetup creates n StorageV3 segments with a first revision.
func manifestSetup(clients []*client.Client, n int) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := clients[0]
	vchs, err := c.AllocVirtualChannels(ctx, manifestCollection, 1, "")
	if err != nil {
		return nil, fmt.Errorf("manifest setup: %w", err)
	}
	first, _, err := c.AllocID(ctx, uint32(n))
	if err != nil {
		return nil, fmt.Errorf("manifest setup: %w", err)
	}
	segs := make([]int64, n)
	for i := range segs {
		segs[i] = int64(first) + int64(i)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(clients))
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += len(clients) {
				seg := segs[i]
				_, err := clients[w].CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: seg,
					Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
						ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: []string{fmt.Sprintf("insert_log/%d/1/%d/100/1", manifestCollection, seg)}}}}}},
					Catalog: &coordpb.CatalogMutation{NewSegment: &coordpb.ManifestNewSegment{CollectionId: manifestCollection, PartitionId: 1,
						Vchannel: vchs[0], NumOfRows: 100}}})
				if err != nil {
					errs <- fmt.Errorf("manifest setup: create segment %d: %w", seg, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return segs, nil
}

// manifestRun runs callers closed-loop for duration; each call commits
// AddStats to batch distinct random segments of segs.
func manifestRun(clients []*client.Client, segs []int64, callers, batch int, duration time.Duration) manifestCell {
	var mu sync.Mutex
	var lats []time.Duration
	errs := 0
	var wg sync.WaitGroup
	start := time.Now()
	stopAt := start.Add(duration)
	for k := 0; k < callers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[k%len(clients)]
			rng := rand.New(rand.NewPCG(uint64(k), 11))
			key := fmt.Sprintf("bench:%d", k)
			var local []time.Duration
			localErrs := 0
			for n := 0; time.Now().Before(stopAt); n++ {
				// A stats file lies under its segment's directory.
				stats := func(seg int64) *coordpb.ManifestMutation {
					return &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
						Stats: []*coordpb.ManifestStatsEntry{{Key: key, Files: []string{fmt.Sprintf("stats_log/%d/1/%d/%d-%d", manifestCollection, seg, k, n)}}}}}}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				t0 := time.Now()
				var err error
				if batch == 1 {
					seg := segs[rng.IntN(len(segs))]
					_, err = c.CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: seg, Mutation: stats(seg)})
				} else {
					var reqs []*coordpb.CommitSegmentManifestRequest
					for _, i := range rng.Perm(len(segs))[:batch] {
						reqs = append(reqs, &coordpb.CommitSegmentManifestRequest{SegmentId: segs[i], Mutation: stats(segs[i])})
					}
					_, err = c.CommitSegmentManifestBatch(ctx, reqs)
				}
				cancel()
				if err != nil {
					if localErrs == 0 && k == 0 {
						fmt.Fprintf(os.Stderr, "coordbench: manifest: first error: %v\n", err)
					}
					localErrs++
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, local...)
			errs += localErrs
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cell := manifestCell{Callers: callers, Batch: batch, Calls: len(lats), Errors: errs}
	if len(lats) == 0 {
		return cell
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	pct := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Microseconds()) / 1000
	}
	cell.CallsSec = float64(len(lats)) / elapsed.Seconds()
	cell.SegsSec = cell.CallsSec * float64(batch)
	cell.P50ms, cell.P99ms = pct(0.50), pct(0.99)
	return cell
}
