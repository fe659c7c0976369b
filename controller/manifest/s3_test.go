package manifest

import (
	"context"
	"fmt"
	"testing"

	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/testutil"
)

// Manifest commits and the orphan collector on a real S3 server
// (versitygw, testutil.StartS3Server): the exclusive create that decides a
// version's writer is a conditional PUT there.

func openS3Store(t *testing.T, url string) objectstore.Store {
	t.Helper()
	st, err := objectstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestCollectOrphansOnS3(t *testing.T) {
	s := testutil.StartS3Server(t, "manifests")
	s.UseTestCredentials(t)
	collectOrphans(t, openS3Store(t, s.URL()))
}

// The commit property (concurrent committers, crashes between write and
// proposal, lost answers, the collector running throughout), each case in
// a bucket of its own.
func TestManifestCommitPropertiesOnS3(t *testing.T) {
	s := testutil.StartS3Server(t, "manifests")
	s.UseTestCredentials(t)
	n := 0
	manifestCommitProperties(t, func() objectstore.Store {
		n++
		return openS3Store(t, s.NewBucket(t, fmt.Sprintf("case-%d", n)))
	})
}
