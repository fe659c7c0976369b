package cluster_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/testutil"
)

// TestWritePathAndManifestsOnS3: the cluster on a real S3 server
// (versitygw, testutil.StartS3Server) instead of a directory: the streaming
// nodes' flushers write binlogs to the bucket and every inserted row is in
// exactly one Flushed segment's binlogs, read back from the bucket; the
// members write manifest revisions there (exclusive creates, conditional
// PUTs) and the orphan collector removes an orphan revision and nothing a
// pointer names. Every process takes the credentials from its environment
// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never from its command line.
func TestWritePathAndManifestsOnS3(t *testing.T) {
	s3 := testutil.StartS3Server(t, "coordd")
	s3.UseTestCredentials(t) // inherited by every process the launcher starts
	url := s3.URL()
	extra := append(append([]string(nil), flushArgs...), "--object-store", url, "--manifest-gc-grace", "1s", "--manifest-gc-interval", "1h")
	snArgs := append(append([]string(nil), flushSNArgs...), "--object-store", url)
	l := startClusterWith(t, cluster.LauncherConfig{ExtraArgs: extra, StreamingNodes: 2, StreamingExtraArgs: snArgs})
	c, err := client.New(context.Background(), secured(l, client.Config{Endpoints: strings.Split(l.Endpoints(), ","),
		RequestTimeout: testutil.Timeout(60 * time.Second), MaxRetries: math.MaxInt32}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	store, err := objectstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	waitPlacement(t, c, 30*time.Second, "every pchannel assigned", func(ps map[string]placement) bool { return allAssigned(ps, 0) })

	// The write path.
	newCollection(t, c, 121, 4)
	a := insertRows(t, c, 121, 2000)
	f := flushAndWait(t, c, 121, 60*time.Second)
	if len(f.SealedSegmentIds) == 0 {
		t.Fatalf("flush sealed nothing: %+v", f)
	}
	checkExactlyOnce(t, persistedRows(t, c, store, 121), a)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(60*time.Second))
	defer cancel()
	binlogs, err := store.List(ctx, "insert_log/121/")
	if err != nil || len(binlogs) == 0 {
		t.Fatalf("binlogs in the bucket: %d, %v", len(binlogs), err)
	}

	// Manifest commits, then an orphan revision above the pointer (as a
	// leader that died between write and proposal leaves) collected.
	vchs, err := c.AllocVirtualChannels(ctx, 104, 1, "") // createManifestReq's collection
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
	m, err := c.GetSegmentManifest(ctx, seg)
	if err != nil || m.Version != 1 || m.Revision == nil {
		t.Fatalf("after the create: %v %v", m, err)
	}
	published := commands.ManifestKey(m.Base, 1)
	if _, err := store.Get(ctx, published); err != nil {
		t.Fatalf("the published revision is not in the bucket: %v", err)
	}
	orphan := commands.ManifestKey(m.Base, 2)
	if err := store.Create(ctx, orphan, []byte("never published")); err != nil {
		t.Fatal(err)
	}
	var removed []string
	testutil.EventuallyEvery(t, 20*time.Second, 200*time.Millisecond, "the orphan is collected", func() bool {
		rep, err := c.CollectManifestOrphans(ctx, false)
		if err != nil {
			t.Fatalf("collect: %v", err)
		}
		removed = append(removed, rep.Removed...)
		_, err = store.Get(ctx, orphan)
		return errors.Is(err, objectstore.ErrNotFound)
	})
	if !slices.Equal(removed, []string{orphan}) {
		t.Fatalf("the collector removed %v, want only %s", removed, orphan)
	}
	if _, err := store.Get(ctx, published); err != nil {
		t.Fatalf("the published revision is gone after the collection: %v", err)
	}
	if m2, err := c.GetSegmentManifest(ctx, seg); err != nil || m2.Version != 1 || m2.Revision == nil {
		t.Fatalf("after the collection: %v %v", m2, err)
	}
}
