package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coordd/coordd/testutil"
)

// The object store's contract against a real S3 server, versitygw
// (testutil.StartS3Server; `make tools` installs it, and these tests skip
// without it unless COORDD_REQUIRE_REAL_SERVERS=1, which `make test` sets).

// realS3 starts versitygw with a bucket and signs this test's requests
// with its credentials.
func realS3(t *testing.T) *testutil.S3Server {
	t.Helper()
	s := testutil.StartS3Server(t, "coordd")
	s.UseTestCredentials(t)
	return s
}

func openS3(t *testing.T, url string) Store {
	t.Helper()
	st, err := Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestS3Store(t *testing.T) { exercise(t, realS3(t).URL()) }

// Exclusive create under a 32-way race: exactly one winner per key, and
// the key holds the winner's bytes. (versitygw before v1.8.0 let all 32
// win.)
func TestS3CreateIsExclusive(t *testing.T) { checkExclusiveCreate(t, realS3(t).URL(), 32) }

// Objects of several MiB, which the client uploads in parts, round-trip
// whole, are listed with their size, are created exclusively and deleted.
func TestS3LargeObjects(t *testing.T) {
	st := openS3(t, realS3(t).URL())
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{3 << 20, 12<<20 + 1} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		key := fmt.Sprintf("insert_log/1/2/3/100/%d", size)
		if err := st.Put(ctx, key, data); err != nil {
			t.Fatalf("put %d bytes: %v", size, err)
		}
		got, err := st.Get(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %d bytes: %d bytes back, equal %v, %v", size, len(got), bytes.Equal(got, data), err)
		}
		infos, err := st.ListInfo(ctx, key)
		if err != nil || len(infos) != 1 || infos[0].Size != int64(size) {
			t.Fatalf("list %s: %+v %v", key, infos, err)
		}
		ckey := fmt.Sprintf("manifest/1/2/3/manifest-%d", size)
		if err := st.Create(ctx, ckey, data); err != nil {
			t.Fatalf("create %d bytes: %v", size, err)
		}
		if err := st.Create(ctx, ckey, data[:10]); !errors.Is(err, ErrExists) {
			t.Fatalf("second create of %d bytes: %v, want ErrExists", size, err)
		}
		if got, err := st.Get(ctx, ckey); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("created object after the refused create: %d bytes, %v", len(got), err)
		}
		for _, k := range []string{key, ckey} {
			if err := st.Delete(ctx, k); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Get(ctx, k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("get after delete: %v", err)
			}
		}
	}
	if err := st.Delete(ctx, "insert_log/none"); !errors.Is(err, ErrNotFound) && err != nil {
		t.Fatalf("delete of a missing object: %v", err)
	}
}

// A listing longer than one S3 page (1,000 keys) is complete and in
// order, and a prefix selects exactly its keys. The objects are laid as
// files in the server's bucket directory, which it serves as objects:
// 1,100 PUTs would take many seconds on a loaded machine.
func TestS3ListPages(t *testing.T) {
	s := realS3(t)
	st := openS3(t, s.URL())
	ctx := context.Background()
	const n = 1100
	want := map[int]int{}
	for i := range n {
		dir := filepath.Join(s.DataDir, s.Bucket, "stats_log", "1", "2", strconv.Itoa(i%3))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("k%04d", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		want[i%3]++
	}
	all, err := st.List(ctx, "stats_log/")
	if err != nil || len(all) != n {
		t.Fatalf("listed %d of %d keys: %v", len(all), n, err)
	}
	for i := 1; i < len(all); i++ {
		if all[i-1] >= all[i] {
			t.Fatalf("listing out of order at %d: %s, %s", i, all[i-1], all[i])
		}
	}
	one, err := st.List(ctx, "stats_log/1/2/1/")
	if err != nil || len(one) != want[1] {
		t.Fatalf("prefix listing: %d keys, want %d: %v", len(one), want[1], err)
	}
	for _, k := range one {
		if !strings.HasPrefix(k, "stats_log/1/2/1/") {
			t.Fatalf("prefix listing holds %s", k)
		}
	}
}
