package main

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

func TestMutate(t *testing.T) {
	create := &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{
		ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: []string{"a"}}}}}}
	if _, err := mutate(nil, 7, &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("stats before create: %v", err)
	}
	r1, err := mutate(nil, 7, create)
	if err != nil || r1.Version != 1 {
		t.Fatalf("create: %v %v", r1, err)
	}
	cur := &manifestState{version: 1, revision: r1}
	if _, err := mutate(cur, 7, create); status.Code(err) != codes.Aborted {
		t.Fatalf("second create: %v", err)
	}
	stats := func(f string) *coordpb.ManifestMutation {
		return &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: &coordpb.AddStats{
			Stats: []*coordpb.ManifestStatsEntry{{Key: "bf", Files: []string{f}}}}}}
	}
	r2, _ := mutate(cur, 7, stats("x"))
	r3, _ := mutate(&manifestState{version: 2, revision: r2}, 7, stats("y"))
	if r3.Version != 3 || len(r3.Stats) != 1 || r3.Stats[0].Files[0] != "y" {
		t.Fatalf("stats replace: %v", r3)
	}
	if r1.Stats != nil || len(r2.Stats) != 1 || r2.Stats[0].Files[0] != "x" {
		t.Fatal("an earlier revision changed")
	}
	app := &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AppendData{AppendData: &coordpb.AppendData{
		ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: []string{"b"}}}}}}
	r4, _ := mutate(&manifestState{version: 3, revision: r3}, 7, app)
	if len(r4.ColumnGroups) != 1 || len(r4.ColumnGroups[0].Files) != 2 || len(r1.ColumnGroups[0].Files) != 1 {
		t.Fatalf("append: %v (first revision %v)", r4, r1)
	}
	drop := &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_DropIndexes{DropIndexes: &coordpb.DropIndexes{}}}
	if _, err := mutate(cur, 7, drop); status.Code(err) != codes.Unimplemented {
		t.Fatalf("drop indexes: %v", err)
	}
}

func TestCreateFileIsExclusive(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "manifest-1")
	if err := createFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := createFile(p, []byte("two")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("content %q", b)
	}
	if left, _ := os.ReadDir(filepath.Dir(p)); len(left) != 1 {
		t.Fatalf("%d files left", len(left))
	}
}

func TestWALAppendOffsets(t *testing.T) {
	w, err := newWAL(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	for i := uint64(1); i <= 3; i++ {
		if off, err := w.append("ch", []byte("m")); err != nil || off != i {
			t.Fatalf("append %d: %d %v", i, off, err)
		}
	}
	if off, _ := w.append("other", []byte("m")); off != 1 {
		t.Fatalf("a second channel starts at %d", off)
	}
	fi, err := os.Stat(filepath.Join(w.dir, "ch.wal"))
	if err != nil || fi.Size() != 3*5 {
		t.Fatalf("wal file: %v %v", fi, err)
	}
}

// An exclusive resource key admits one holder; different keys do not wait.
func TestBroadcastLocks(t *testing.T) {
	b := &broadcaster{locks: map[string]*sync.RWMutex{}}
	hot := []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "db:hot"}}
	unlock := b.lock(hot)
	other := make(chan struct{})
	go func() { b.lock([]*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: "db:x"}})(); close(other) }()
	select {
	case <-other:
	case <-time.After(5 * time.Second):
		t.Fatal("a different key waited")
	}
	second := make(chan struct{})
	go func() { b.lock(hot)(); close(second) }()
	select {
	case <-second:
		t.Fatal("a conflicting broadcast got the key")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	select {
	case <-second:
	case <-time.After(5 * time.Second):
		t.Fatal("the key was never handed on")
	}
}

func TestNewer(t *testing.T) {
	a := &coordpb.Position{Timestamp: 10, Offset: 1}
	if !newer(a, nil) || newer(a, a) || !newer(&coordpb.Position{Timestamp: 10, Offset: 2}, a) || newer(&coordpb.Position{Timestamp: 9, Offset: 9}, a) {
		t.Fatal("newer")
	}
}
