package testutil

import (
	"strings"
	"sync"
	"testing"
)

// TestBufferConcurrentWriteRead: writers and a reader may overlap (run
// with -race to check the locking); every write lands.
func TestBufferConcurrentWriteRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				_, _ = b.Write([]byte("x"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 400) {
		t.Fatalf("buffer holds %d bytes; want 400", len(got))
	}
}
