package objectstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestDirectoryListDuringWrites: listing a directory store while other
// goroutines create and put objects never fails and never lists a
// writer's temporary file; every object created before the listing
// started is listed.
func TestDirectoryListDuringWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 20 {
		if err := s.Create(ctx, fmt.Sprintf("m/seg/before-%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 400; n++ { // bounded: listing time grows with the directory
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("m/seg/w%d-%d", w, n)
				if n%2 == 0 {
					err = s.Create(ctx, key, []byte("payload"))
				} else {
					err = s.Put(ctx, key, []byte("payload"))
				}
				if err != nil {
					t.Errorf("write %s: %v", key, err)
					return
				}
				if n%3 == 0 {
					_ = s.Delete(ctx, key)
				}
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	for i := range 300 {
		infos, err := s.ListInfo(ctx, "m/")
		if err != nil {
			t.Fatalf("listing %d failed while objects were written: %v", i, err)
		}
		before := 0
		for _, o := range infos {
			if strings.HasSuffix(o.Key, ".tmp") {
				t.Fatalf("listing %d shows a temporary file %s", i, o.Key)
			}
			if strings.HasPrefix(o.Key, "m/seg/before-") {
				before++
			}
		}
		if before != 20 {
			t.Fatalf("listing %d: %d of the 20 earlier objects", i, before)
		}
	}
}
