package objectstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// checkExclusiveCreate: a second Create of a key fails with ErrExists and
// leaves the first object; of writers concurrent creators exactly one wins.
func checkExclusiveCreate(t *testing.T, url string, writers int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := "manifest/1/2/3/manifest-1"
	if err := s.Create(ctx, key, []byte("first")); err != nil {
		t.Fatalf("first create: %v", err)
	}
	if err := s.Create(ctx, key, []byte("second")); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if got, err := s.Get(ctx, key); err != nil || string(got) != "first" {
		t.Fatalf("after the refused create: %q %v", got, err)
	}
	for round := range 5 {
		key := fmt.Sprintf("manifest/1/2/3/manifest-%d", round+2)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []string
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf("writer %d", w)
				err := s.Create(ctx, key, []byte(body))
				switch {
				case err == nil:
					mu.Lock()
					won = append(won, body)
					mu.Unlock()
				case !errors.Is(err, ErrExists):
					t.Errorf("create %s: %v", key, err)
				}
			}()
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("%s: %d creators won (%v), want exactly 1", key, len(won), won)
		}
		if got, err := s.Get(ctx, key); err != nil || string(got) != won[0] {
			t.Fatalf("%s holds %q (%v), the winner wrote %q", key, got, err, won[0])
		}
	}
}

func TestDirectoryCreateIsExclusive(t *testing.T) { checkExclusiveCreate(t, t.TempDir(), 32) }

// A created object's directory entry is synced before Create returns, and
// so is every directory Create had to make (in its parent), top down: a
// pointer committed right after must never outlive its object in a crash.
func TestCreateSyncsTheNewEntries(t *testing.T) {
	root := t.TempDir()
	st, err := Open(context.Background(), "file://"+root)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := st.(*bucket)
	var synced []string
	b.syncDir = func(dir string) error { synced = append(synced, dir); return nil }
	if err := b.Create(context.Background(), "a/b/obj", []byte("x")); err != nil {
		t.Fatal(err)
	}
	want := []string{root, filepath.Join(root, "a"), filepath.Join(root, "a", "b")}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %v; want %v", synced, want)
	}
	synced = nil
	if err := b.Create(context.Background(), "a/b/obj2", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(root, "a", "b")}; !slices.Equal(synced, want) {
		t.Fatalf("second object in an existing directory synced %v; want %v", synced, want)
	}
	b.syncDir = func(string) error { return errors.New("injected: fsync failed") }
	if err := b.Create(context.Background(), "a/b/obj3", []byte("z")); err == nil {
		t.Fatal("Create succeeded although its directory could not be synced")
	}
}
