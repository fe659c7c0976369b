package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// w4: segment manifest commits. Setup writes the first revision of every
// data-set segment; then each commit sets a stats key (a new file) on a
// segment: spread over the 1,000 segments (client c takes c, c+clients,
// ...), or all on one hot segment, where commits queue per segment on
// both systems.
func w4() workloadDef {
	return workloadDef{setup: setupManifests, variants: []variant{
		{name: "1000-segments", newOp: w4Op(false)},
		{name: "hot-segment", newOp: w4Op(true)},
	}}
}

func setupManifests(s *system) error {
	if err := setupData(s); err != nil {
		return err
	}
	if s.data.manifests {
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(s.data.vchs))
	work := make(chan dataVch)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mc := coordpb.NewManifestServiceClient(s.conn(w))
			for v := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := retry(ctx, func() error {
					_, err := mc.CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: v.segment,
						RequestId: fmt.Sprintf("coordbench-create-%d", v.segment),
						Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
							ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100, 101}, Files: []string{fmt.Sprintf("insert_log/%d/1/%d/100/0.parquet", v.collection, v.segment)}}}}}}})
					return err
				})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("create manifest of segment %d: %w", v.segment, err)
				}
			}
		}()
	}
	for _, v := range s.data.vchs {
		work <- v
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	s.data.manifests = true
	return nil
}

func w4Op(hot bool) func(s *system, c, clients int) clientOp {
	return func(s *system, c, clients int) clientOp {
		mc := coordpb.NewManifestServiceClient(s.conn(c))
		return func(ctx context.Context, i int) error {
			v := s.data.vchs[0]
			if !hot {
				v = s.data.vchs[(c+i*clients)%len(s.data.vchs)]
			}
			_, err := mc.CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: v.segment,
				Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
					Stats: []*coordpb.ManifestStatsEntry{{Key: "bloom_filter", Files: []string{fmt.Sprintf("stats_log/%d/1/%d/bf-%d", v.collection, v.segment, nextPosition()-positionBase)}}}}}}})
			return err
		}
	}
}
