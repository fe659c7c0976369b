package cluster_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/testutil"
)

// manifestPause is how long each member waits between writing a revision
// and proposing it (--test-only-manifest-pause-after-write): the window in
// which the test kills the leader.
const manifestPause = 2 * time.Second

func createManifestReq(seg int64, vchannel string) *coordpb.CommitSegmentManifestRequest {
	return &coordpb.CommitSegmentManifestRequest{SegmentId: seg,
		Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
			ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: []string{"insert_log/104/1/" + strconv.FormatInt(seg, 10) + "/100/1"}}}}}},
		Catalog: &coordpb.CatalogMutation{NewSegment: &coordpb.ManifestNewSegment{CollectionId: 104, PartitionId: 1, Vchannel: vchannel, NumOfRows: 100}}}
}

// TestManifestCommitSurvivesLeaderKillBetweenWriteAndCommit runs real
// members and SIGKILLs the leader after it wrote a revision and before it
// proposed the publication: the pointer never names a missing revision,
// the written revision is an orphan, and the collector removes it. The
// CLI shapes later checks rely on (manifest get/commit/gc -o json, the
// stale refusal) are exercised on the way.
func TestManifestCommitSurvivesLeaderKillBetweenWriteAndCommit(t *testing.T) {
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: []string{
		"--test-only-manifest-pause-after-write", manifestPause.String(),
		"--manifest-gc-grace", "1s", "--manifest-gc-interval", "1h"}})
	e := l.Endpoints()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	c, err := client.New(ctx, client.Config{Endpoints: []string{l.Members()[0].GRPCAddr, l.Members()[1].GRPCAddr, l.Members()[2].GRPCAddr},
		RequestTimeout: 20 * time.Second, AttemptTimeout: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vchs, err := c.AllocVirtualChannels(ctx, 104, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := c.AllocID(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	seg := int64(first)
	if _, err := c.CommitSegmentManifest(ctx, createManifestReq(seg, vchs[0])); err != nil {
		t.Fatalf("create: %v", err)
	}
	id := strconv.FormatInt(seg, 10)

	// The CLI: commit, get, and a stale refusal with both versions.
	var committed struct {
		SegmentID int64 `json:"segment_id"`
		Version   int64 `json:"version"`
	}
	coordctlJSON(t, e, &committed, "manifest", "commit", id, "--add-stats", "bloom=stats_log/104/1/"+id+"/0")
	if committed.SegmentID != seg || committed.Version != 2 {
		t.Fatalf("manifest commit printed %+v", committed)
	}
	var got struct {
		SegmentID int64  `json:"segment_id"`
		Base      string `json:"base"`
		Version   int64  `json:"version"`
		Revision  struct {
			Version int64               `json:"version"`
			Stats   map[string][]string `json:"stats"`
		} `json:"revision"`
	}
	coordctlJSON(t, e, &got, "manifest", "get", id)
	if got.Version != 2 || got.Revision.Version != 2 || len(got.Revision.Stats["bloom"]) != 1 || got.Base != commands.ManifestBase(104, 1, seg) {
		t.Fatalf("manifest get printed %+v", got)
	}
	prepared := filepath.Join(t.TempDir(), "prepared.json")
	if err := os.WriteFile(prepared, []byte(`{"publish_prepared":{"version":2}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := coordctl(t, e, "manifest", "commit", id, "--mutation", prepared, "--expected", "1", "-o", "json")
	var refusal struct {
		Error    string `json:"error"`
		Expected int64  `json:"expected"`
		Current  int64  `json:"current"`
	}
	if code != 1 || json.Unmarshal([]byte(out), &refusal) != nil || refusal.Error != "stale" || refusal.Expected != 1 || refusal.Current != 2 {
		t.Fatalf("stale commit: exit %d, printed %q", code, out)
	}

	// Kill the leader inside the window between write and proposal.
	conns := dialAll(t, l)
	leader := leaderIndex(t, l, conns, -1)
	orphan := filepath.Join(l.ObjectStoreDir(), filepath.FromSlash(commands.ManifestKey(got.Base, 3)))
	// One attempt only: a retry on the new leader would publish a newer
	// revision and delete the skipped one itself (the unit tests cover
	// that); here the orphan must be left to the collector.
	once, err := client.New(ctx, client.Config{Endpoints: []string{l.Members()[leader].GRPCAddr},
		RequestTimeout: 20 * time.Second, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer once.Close()
	done := make(chan error, 1)
	go func() {
		_, err := once.CommitSegmentManifest(ctx, &coordpb.CommitSegmentManifestRequest{SegmentId: seg,
			Mutation: &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
				Stats: []*coordpb.ManifestStatsEntry{{Key: "text:101", Files: []string{"stats_log/104/1/" + strconv.FormatInt(seg, 10) + "/t"}}}}}}})
		done <- err
	}()
	testutil.Eventually(t, "the leader wrote revision 3", func() bool {
		_, err := os.Stat(orphan)
		return err == nil
	})
	if err := l.Kill(leader); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Fatal("the commit succeeded although its leader was killed before proposing")
	}
	m, err := c.GetSegmentManifest(ctx, seg)
	if err != nil {
		t.Fatalf("get after the kill: %v", err)
	}
	if m.Version != 2 {
		t.Fatalf("pointer at version %d; revision 3's leader died before proposing it", m.Version)
	}
	if m.Revision == nil || m.Revision.Version != m.Version {
		t.Fatalf("the pointer (version %d) names a revision that cannot be read: %v", m.Version, m.Revision)
	}

	// The collector removes the orphan once it is past the grace period,
	// and nothing the pointer references.
	var removed []string
	testutil.Eventually(t, "the orphan is collected", func() bool {
		var rep struct {
			Removed []string `json:"removed"`
		}
		coordctlJSON(t, e, &rep, "manifest", "gc")
		removed = append(removed, rep.Removed...)
		_, err := os.Stat(orphan)
		return os.IsNotExist(err)
	})
	if len(removed) != 1 || removed[0] != commands.ManifestKey(got.Base, 3) {
		t.Fatalf("gc removed %v, want only revision 3", removed)
	}
	if m2, err := c.GetSegmentManifest(ctx, seg); err != nil || m2.Version != m.Version || m2.Revision == nil {
		t.Fatalf("after collection: %v %v", m2, err)
	}
}
