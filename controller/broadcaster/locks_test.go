package broadcaster

import (
	"context"
	"errors"
	"math/rand"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/testutil"
)

func clusterKey(shared bool) *logpb.ResourceKey {
	return &logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_CLUSTER, Shared: shared}
}

func TestKeyName(t *testing.T) {
	for _, tc := range []struct {
		k          *logpb.ResourceKey
		name, labl string
	}{
		{collKey("db", "coll", false), "CollectionName:db:coll@X", "CollectionName@X"},
		{collKey("db", "coll", true), "CollectionName:db:coll@R", "CollectionName@R"},
		{clusterKey(true), "Cluster@R", "Cluster@R"},
		{clusterKey(false), "Cluster@X", "Cluster@X"},
		{dbKey("db1"), "DBName:db1@R", "DBName@R"},
		{&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_PRIVILEGE}, "Privilege@X", "Privilege@X"},
		{&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_SNAPSHOT_NAME, Key: "5:s", Shared: true}, "SnapshotName:5:s@R", "SnapshotName@R"},
		{&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_IMPORT_JOB_ID, Key: "9"}, "ImportJobID:9@X", "ImportJobID@X"},
	} {
		if got := KeyName(tc.k); got != tc.name {
			t.Errorf("KeyName(%v) = %q, want %q", tc.k, got, tc.name)
		}
		if got := lockLabel(tc.k); got != tc.labl {
			t.Errorf("lockLabel(%v) = %q, want %q", tc.k, got, tc.labl)
		}
	}
}

// TestLockCompatibility: for two requests on keys, whether the second is
// granted while the first is held.
func TestLockCompatibility(t *testing.T) {
	a := func(shared bool) []*logpb.ResourceKey {
		return commands.NormalizeResourceKeys([]*logpb.ResourceKey{collKey("db", "a", shared)})
	}
	b := func(shared bool) []*logpb.ResourceKey {
		return commands.NormalizeResourceKeys([]*logpb.ResourceKey{collKey("db", "b", shared)})
	}
	norm := func(ks ...*logpb.ResourceKey) []*logpb.ResourceKey { return commands.NormalizeResourceKeys(ks) }
	for _, tc := range []struct {
		name          string
		first, second []*logpb.ResourceKey
		granted       bool
	}{
		{"shared/shared same key", a(true), a(true), true},
		{"shared/exclusive same key", a(true), a(false), false},
		{"exclusive/shared same key", a(false), a(true), false},
		{"exclusive/exclusive same key", a(false), a(false), false},
		{"exclusive on different keys", a(false), b(false), true},
		{"exclusive cluster blocks everything", norm(clusterKey(false)), b(true), false},
		{"everything blocks exclusive cluster", b(true), norm(clusterKey(false)), false},
		{"shared cluster with shared cluster", norm(clusterKey(true)), norm(clusterKey(true)), true},
		{"shared db, exclusive colls", norm(dbKey("db"), collKey("db", "a", false)), norm(dbKey("db"), collKey("db", "b", false)), true},
		{"exclusive db blocks coll in it", norm(&logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "db"}),
			norm(dbKey("db"), collKey("db", "b", false)), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lt := newLockTable()
			g1, ok := lt.tryLock(tc.first)
			if !ok {
				t.Fatalf("first tryLock failed on an empty table")
			}
			g2, ok := lt.tryLock(tc.second)
			if ok != tc.granted {
				t.Fatalf("second tryLock granted = %v, want %v", ok, tc.granted)
			}
			// The blocking lock agrees with tryLock.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			g2.release()
			g3, _, err := lt.lock(ctx, tc.second, nil)
			if (err == nil) != tc.granted {
				t.Fatalf("blocking lock err = %v, want granted %v", err, tc.granted)
			}
			g3.release()
			g1.release()
			if n := lt.size(); n != 0 {
				t.Fatalf("%d keys left in the table after every release", n)
			}
		})
	}
}

func TestTryLockIsAllOrNothing(t *testing.T) {
	lt := newLockTable()
	hold, _ := lt.tryLock(commands.NormalizeResourceKeys([]*logpb.ResourceKey{collKey("db", "b", false)}))
	want := commands.NormalizeResourceKeys([]*logpb.ResourceKey{collKey("db", "a", false), collKey("db", "b", false)})
	if _, ok := lt.tryLock(want); ok {
		t.Fatalf("tryLock succeeded over a held key")
	}
	// Nothing of the failed attempt is kept: "a" and Cluster are free.
	if s, x, w := lt.holders(collKey("db", "a", false)); s != 0 || x || w != 0 {
		t.Fatalf("key a: shared %d exclusive %v waiting %d after a failed tryLock", s, x, w)
	}
	if s, _, _ := lt.holders(clusterKey(true)); s != 1 {
		t.Fatalf("cluster key shared holders = %d, want 1 (only the first guard)", s)
	}
	hold.release()
	g, ok := lt.tryLock(want)
	if !ok {
		t.Fatalf("tryLock failed on free keys")
	}
	g.release()
	g.release() // idempotent
	if lt.size() != 0 {
		t.Fatalf("table not empty")
	}
}

// TestLockFIFO: an exclusive waiter is not starved by later shared
// requests, and shared waiters behind it are granted together.
func TestLockFIFO(t *testing.T) {
	lt := newLockTable()
	k := []*logpb.ResourceKey{collKey("db", "a", true)}
	x := []*logpb.ResourceKey{collKey("db", "a", false)}
	s1, _ := lt.tryLock(k)

	xGot := make(chan *lockGuard, 1)
	go func() {
		g, _, err := lt.lock(context.Background(), x, nil)
		if err != nil {
			t.Errorf("exclusive lock: %v", err)
		}
		xGot <- g
	}()
	testutil.Eventually(t, "exclusive waiter queued", func() bool { _, _, w := lt.holders(x[0]); return w == 1 })

	// A later shared request queues behind the exclusive waiter even
	// though it is compatible with the shared holder.
	if _, ok := lt.tryLock(k); ok {
		t.Fatalf("a shared request overtook a queued exclusive waiter")
	}
	sGot := make(chan *lockGuard, 2)
	for i := 0; i < 2; i++ {
		go func() {
			g, _, err := lt.lock(context.Background(), k, nil)
			if err != nil {
				t.Errorf("shared lock: %v", err)
			}
			sGot <- g
		}()
	}
	testutil.Eventually(t, "shared waiters queued", func() bool { _, _, w := lt.holders(x[0]); return w == 3 })

	s1.release()
	var xg *lockGuard
	select {
	case xg = <-xGot:
	case <-time.After(5 * time.Second):
		t.Fatalf("exclusive waiter not granted after the shared holder left")
	}
	select {
	case <-sGot:
		t.Fatalf("shared waiter granted while exclusive is held")
	case <-time.After(20 * time.Millisecond):
	}
	xg.release()
	for i := 0; i < 2; i++ {
		select {
		case g := <-sGot:
			defer g.release()
		case <-time.After(5 * time.Second):
			t.Fatalf("shared waiters not granted together")
		}
	}
	if s, _, _ := lt.holders(k[0]); s != 2 {
		t.Fatalf("shared holders = %d, want 2", s)
	}
}

// TestLockTimeout: the wait honours the deadline, names the key and the
// wait, leaves nothing held, and unblocks waiters queued behind it.
func TestLockTimeout(t *testing.T) {
	lt := newLockTable()
	dbX := &logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "db1"}
	held, _ := lt.tryLock(commands.NormalizeResourceKeys([]*logpb.ResourceKey{dbKey("db1")}))
	defer held.release()

	// Sorted: CollectionName (taken at once), DBName (waits), Cluster.
	want := commands.NormalizeResourceKeys([]*logpb.ResourceKey{dbX, collKey("db1", "c1", false)})
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer cancel()

	// A shared waiter queued behind the exclusive one.
	sGot := make(chan error, 1)
	go func() {
		testutil.Eventually(t, "exclusive waiter queued", func() bool { _, _, w := lt.holders(dbX); return w == 1 })
		g, _, err := lt.lock(context.Background(), []*logpb.ResourceKey{dbKey("db1")}, nil)
		g.release()
		sGot <- err
	}()

	start := time.Now()
	g, waited, err := lt.lock(ctx, want, nil)
	if g != nil {
		t.Fatalf("lock granted over a held key")
	}
	var lte *LockTimeoutError
	if !errors.As(err, &lte) {
		t.Fatalf("err = %v (%T), want *LockTimeoutError", err, err)
	}
	if lte.Key != "DBName:db1@X" {
		t.Fatalf("Key = %q, want DBName:db1@X", lte.Key)
	}
	if lte.Waited < 30*time.Millisecond || lte.Waited > time.Since(start) || waited != lte.Waited {
		t.Fatalf("Waited = %v (returned %v), want about 40ms and <= %v", lte.Waited, waited, time.Since(start))
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err does not wrap the context error: %v", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "DBName:db1@X") || !strings.Contains(msg, "waited") {
		t.Fatalf("message %q does not name the key and the wait", msg)
	}
	// The collection key it had taken is released again.
	if s, x, w := lt.holders(want[0]); s != 0 || x || w != 0 {
		t.Fatalf("collection key after timeout: shared %d exclusive %v waiting %d", s, x, w)
	}
	select {
	case err := <-sGot:
		if err != nil {
			t.Fatalf("shared waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("shared waiter behind the timed-out exclusive one was not granted")
	}
}

func TestLockAlreadyCancelled(t *testing.T) {
	lt := newLockTable()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// Free keys are granted even with an ended context (no wait).
	g, _, err := lt.lock(ctx, commands.NormalizeResourceKeys(nil), nil)
	if err != nil {
		t.Fatalf("free keys with a cancelled ctx: %v", err)
	}
	_, _, err = lt.lock(ctx, commands.NormalizeResourceKeys([]*logpb.ResourceKey{clusterKey(false)}), nil)
	var lte *LockTimeoutError
	if !errors.As(err, &lte) || lte.Key != "Cluster@X" || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a LockTimeoutError on Cluster@X wrapping Canceled", err)
	}
	g.release()
	if lt.size() != 0 {
		t.Fatalf("table not empty")
	}
}

func TestLockTableClose(t *testing.T) {
	lt := newLockTable()
	held, _ := lt.tryLock(commands.NormalizeResourceKeys([]*logpb.ResourceKey{clusterKey(false)}))
	errc := make(chan error, 1)
	go func() {
		_, _, err := lt.lock(context.Background(), commands.NormalizeResourceKeys(nil), nil)
		errc <- err
	}()
	testutil.Eventually(t, "waiter queued", func() bool { _, _, w := lt.holders(clusterKey(true)); return w == 1 })
	lt.close()
	select {
	case err := <-errc:
		if !errors.Is(err, leadership.ErrNotLeader) {
			t.Fatalf("err = %v, want leadership.ErrNotLeader", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("waiter not woken by close")
	}
	held.release() // no-op, no panic
	if _, _, err := lt.lock(context.Background(), commands.NormalizeResourceKeys(nil), nil); !errors.Is(err, leadership.ErrNotLeader) {
		t.Fatalf("lock after close: %v", err)
	}
	if _, ok := lt.tryLock(commands.NormalizeResourceKeys(nil)); ok {
		t.Fatalf("tryLock after close succeeded")
	}
}

// TestLockConcurrency: many lockers on random key sets with random
// deadlines; mutual exclusion always holds, nobody deadlocks, and the
// table ends empty.
func TestLockConcurrency(t *testing.T) {
	lt := newLockTable()
	names := []string{"a", "b", "c", "d"}
	type counter struct{ shared, excl atomic.Int32 }
	counters := map[string]*counter{}
	for _, n := range names {
		counters[commands.ResourceKeyID(collKey("db", n, false))] = &counter{}
	}
	counters[commands.ResourceKeyID(clusterKey(true))] = &counter{}
	var wg sync.WaitGroup
	var granted, timedOut atomic.Int32
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(seed int64) {
			defer wg.Done()
			r := rand.New(rand.NewSource(seed))
			for i := 0; i < 200; i++ {
				var ks []*logpb.ResourceKey
				if r.Intn(20) == 0 {
					ks = append(ks, clusterKey(false))
				}
				for _, n := range names {
					if r.Intn(3) == 0 {
						ks = append(ks, collKey("db", n, r.Intn(2) == 0))
					}
				}
				ks = commands.NormalizeResourceKeys(ks)
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.Intn(3000))*time.Microsecond)
				g, _, err := lt.lock(ctx, ks, nil)
				cancel()
				if err != nil {
					var lte *LockTimeoutError
					if !errors.As(err, &lte) {
						t.Errorf("lock: %v", err)
						return
					}
					timedOut.Add(1)
					continue
				}
				granted.Add(1)
				for _, k := range ks {
					c := counters[commands.ResourceKeyID(k)]
					if k.Shared {
						c.shared.Add(1)
						if c.excl.Load() != 0 {
							t.Errorf("%s: shared granted while exclusive held", KeyName(k))
						}
					} else {
						if c.excl.Add(1) != 1 || c.shared.Load() != 0 {
							t.Errorf("%s: exclusive granted while held", KeyName(k))
						}
					}
				}
				time.Sleep(time.Duration(r.Intn(200)) * time.Microsecond) // not a wait: holds the locks a random while
				for i := len(ks) - 1; i >= 0; i-- {
					c := counters[commands.ResourceKeyID(ks[i])]
					if ks[i].Shared {
						c.shared.Add(-1)
					} else {
						c.excl.Add(-1)
					}
				}
				g.release()
			}
		}(int64(w))
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("lockers deadlocked")
	}
	if lt.size() != 0 {
		t.Fatalf("%d keys left in the table", lt.size())
	}
	t.Logf("granted %d, timed out %d", granted.Load(), timedOut.Load())
	if granted.Load() == 0 {
		t.Fatalf("nothing was ever granted")
	}
}
