package nemesis

import (
	"context"
	"sync"
	"testing"
	"time"
)

// waitsCluster is the fake cluster with n members that records how long
// each WaitReady may take.
type waitsCluster struct {
	fakeCluster
	n     int
	mu    sync.Mutex
	waits []time.Duration
}

func (w *waitsCluster) N() int       { return w.n }
func (w *waitsCluster) HealNetwork() {}
func (w *waitsCluster) WaitReady(_ context.Context, _ int, timeout time.Duration) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.waits = append(w.waits, timeout)
	return nil
}

// TestReadyTimeoutLengthensMemberWaits: Config.ReadyTimeout (the scale
// templates') is how long the heal waits for each member, where it is
// longer than the default; zero, or a shorter one, keeps the defaults.
func TestReadyTimeoutLengthensMemberWaits(t *testing.T) {
	for _, c := range []struct {
		ready, want time.Duration
	}{{0, 60 * time.Second}, {10 * time.Second, 60 * time.Second}, {3 * time.Minute, 3 * time.Minute}} {
		f := &waitsCluster{fakeCluster: fakeCluster{t0: time.Now()}, n: 3}
		n := New(f, Config{Seed: 1, Kinds: []Kind{KillNode}, ReadyTimeout: c.ready}, nil)
		if err := n.Heal(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(f.waits) != 3 {
			t.Fatalf("ReadyTimeout %v: %d waits, want one per member", c.ready, len(f.waits))
		}
		for _, got := range f.waits {
			if got != c.want {
				t.Fatalf("ReadyTimeout %v: the heal waited up to %v for a member, want %v", c.ready, got, c.want)
			}
		}
		if got := n.ready(30 * time.Second); got != max(30*time.Second, c.ready) {
			t.Fatalf("ReadyTimeout %v: a restart waits up to %v", c.ready, got)
		}
	}
}
