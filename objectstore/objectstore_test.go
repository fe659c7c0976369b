package objectstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// exercise runs the same contract against any backend.
func exercise(t *testing.T, url string) {
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	defer s.Close()
	if _, err := s.Get(ctx, "insert_log/1/2/3/100/9"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of a missing object: %v, want ErrNotFound", err)
	}
	objs := map[string][]byte{
		"insert_log/1/2/3/100/9":  []byte("first"),
		"insert_log/1/2/3/100/10": {0, 1, 2, 255},
		"insert_log/1/2/4/100/11": []byte{},
		"other/x":                 []byte("y"),
	}
	for k, v := range objs {
		if err := s.Put(ctx, k, v); err != nil {
			t.Fatalf("Put %s: %v", k, err)
		}
	}
	for k, v := range objs {
		got, err := s.Get(ctx, k)
		if err != nil || string(got) != string(v) {
			t.Fatalf("Get %s = %q, %v; want %q", k, got, err, v)
		}
	}
	keys, err := s.List(ctx, "insert_log/1/2/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"insert_log/1/2/3/100/10", "insert_log/1/2/3/100/9", "insert_log/1/2/4/100/11"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("List = %v, want %v", keys, want)
	}
	// Put replaces.
	if err := s.Put(ctx, "other/x", []byte("z")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "other/x"); string(got) != "z" {
		t.Fatalf("after replace: %q", got)
	}
	if err := s.Delete(ctx, "other/x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "other/x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	// Bad keys are refused and change nothing.
	for _, k := range []string{"", "/abs", "a//b", "a/../b", "..", "a/./b", "a\\b", "a\x00b", strings.Repeat("k", MaxKeyBytes+1)} {
		if err := s.Put(ctx, k, []byte("bad")); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("Put(%q): %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Fatalf("Get(%q): %v, want ErrInvalidKey", k, err)
		}
	}
	all, err := s.List(ctx, "")
	if err != nil || len(all) != 3 {
		t.Fatalf("List all = %v, %v; want the 3 remaining objects", all, err)
	}
}

func TestDirectoryStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "objects", "nested")
	url, err := DefaultDirURL(dir)
	if err != nil {
		t.Fatal(err)
	}
	exercise(t, url)
	// The objects are plain files under the directory.
	data, err := os.ReadFile(filepath.Join(dir, "insert_log", "1", "2", "3", "100", "9"))
	if err != nil || string(data) != "first" {
		t.Fatalf("file on disk: %q, %v", data, err)
	}
	// A bare path opens the same directory.
	s, err := Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Get(context.Background(), "insert_log/1/2/3/100/9"); err != nil || string(got) != "first" {
		t.Fatalf("bare path: %q, %v", got, err)
	}
}

func TestOpenRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "  ", "gs://bucket", "http://x/y", "file://remotehost/dir", "file://rel/dir", "s3://?endpoint=http://127.0.0.1:1"} {
		if s, err := Open(context.Background(), u); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", u)
		} else if !errors.Is(err, ErrInvalidURL) {
			t.Errorf("Open(%q): %v, want ErrInvalidURL", u, err)
		}
	}
}

// ValidateKey runs for every object a commit creates: it allocates
// nothing for a valid key.
func TestValidateKeyDoesNotAllocate(t *testing.T) {
	n := testing.AllocsPerRun(100, func() {
		if err := ValidateKey("manifest/100/1/5/manifest-7"); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%.1f allocations per ValidateKey, want 0", n)
	}
}
