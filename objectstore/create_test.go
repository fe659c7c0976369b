package objectstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// checkExclusiveCreate: a second Create of a key fails with ErrExists and
// leaves the first object; of concurrent creators exactly one wins.
func checkExclusiveCreate(t *testing.T, url string) {
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
		for w := range 4 {
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

func TestDirectoryCreateIsExclusive(t *testing.T) { checkExclusiveCreate(t, t.TempDir()) }

func TestS3CreateIsExclusive(t *testing.T) { checkExclusiveCreate(t, fakeS3(t, "manifests")) }
