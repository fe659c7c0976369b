package broadcaster

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// DomainName is the spelling of a resource-key domain in errors and metric
// labels (docs/semantics.md#resource-keys).
func DomainName(d logpb.ResourceDomain) string {
	switch d {
	case logpb.ResourceDomain_RK_CLUSTER:
		return "Cluster"
	case logpb.ResourceDomain_RK_DB_NAME:
		return "DBName"
	case logpb.ResourceDomain_RK_COLLECTION_NAME:
		return "CollectionName"
	case logpb.ResourceDomain_RK_PRIVILEGE:
		return "Privilege"
	case logpb.ResourceDomain_RK_SNAPSHOT_NAME:
		return "SnapshotName"
	case logpb.ResourceDomain_RK_IMPORT_JOB_ID:
		return "ImportJobID"
	}
	return "Domain" + strconv.Itoa(int(d))
}

func modeLetter(shared bool) string {
	if shared {
		return "R"
	}
	return "X"
}

// KeyName renders a resource key with its mode: "CollectionName:db:coll@X",
// "Cluster@R" (a domain without a key has no ':' part).
func KeyName(k *logpb.ResourceKey) string {
	s := DomainName(k.Domain)
	if k.Key != "" {
		s += ":" + k.Key
	}
	return s + "@" + modeLetter(k.Shared)
}

// lockLabel is the rk_lock metric label: domain and mode, not the key (the
// key would make the label set unbounded).
func lockLabel(k *logpb.ResourceKey) string { return DomainName(k.Domain) + "@" + modeLetter(k.Shared) }

// lockTable is the leader-memory resource-key lock table
// (docs/semantics.md#resource-keys): shared/exclusive per ResourceKeyID, FIFO
// per key so an exclusive waiter is not starved by a stream of shared holders.
// A caller acquires keys one at a time in the normalized order and releases in
// reverse, which rules out deadlock: a waiter on key k holds only keys ordered
// before k.
type lockTable struct {
	mu     sync.Mutex
	keys   map[string]*keyLock
	closed bool
}

type keyLock struct {
	shared    int  // shared holders
	exclusive bool // one exclusive holder
	queue     []*lockWaiter
	// finishing are the tasks that handed this key on when their
	// completion was queued for the log (lockGuard.handOff) and have not
	// finished yet. Whoever is granted the key meanwhile in a conflicting
	// mode is ordered behind them (handoff.go).
	finishing []finishingHold
}

type lockWaiter struct {
	shared  bool
	granted bool
	ready   chan struct{} // closed when granted or when the table closes
	behind  []predecessor // set with granted
}

func newLockTable() *lockTable { return &lockTable{keys: map[string]*keyLock{}} }

func (kl *keyLock) compatible(shared bool) bool {
	if kl.exclusive {
		return false
	}
	return shared || kl.shared == 0
}

func (kl *keyLock) hold(shared bool) {
	if shared {
		kl.shared++
	} else {
		kl.exclusive = true
	}
}

func (kl *keyLock) idle() bool {
	return kl.shared == 0 && !kl.exclusive && len(kl.queue) == 0 && len(kl.finishing) == 0
}

// grantQueued grants waiters from the head of the queue while they are
// compatible with the holders (several shared waiters at once).
func (kl *keyLock) grantQueued() {
	for len(kl.queue) > 0 {
		w := kl.queue[0]
		if !kl.compatible(w.shared) {
			return
		}
		kl.hold(w.shared)
		w.granted = true
		w.behind = kl.conflictingFinishing(w.shared)
		close(w.ready)
		kl.queue[0] = nil
		kl.queue = kl.queue[1:]
	}
}

// tryAcquire grants id at once when nobody holds it incompatibly and nobody
// is queued (FIFO: a newcomer never overtakes a waiter), with the
// conflicting tasks still finishing on it.
func (lt *lockTable) tryAcquireLocked(id string, shared bool) ([]predecessor, bool) {
	kl := lt.keys[id]
	if kl == nil {
		kl = &keyLock{}
		lt.keys[id] = kl
	}
	if len(kl.queue) == 0 && kl.compatible(shared) {
		kl.hold(shared)
		return kl.conflictingFinishing(shared), true
	}
	return nil, false
}

func (lt *lockTable) releaseLocked(id string, shared bool) {
	kl := lt.keys[id]
	if kl == nil {
		return
	}
	if shared {
		if kl.shared > 0 {
			kl.shared--
		}
	} else {
		kl.exclusive = false
	}
	kl.grantQueued()
	if kl.idle() {
		delete(lt.keys, id)
	}
}

// acquireOne waits for one key and returns the conflicting tasks still
// finishing on it. It returns errLocksClosed when the table closes
// (leadership ended) and ctx's error when ctx ends first.
func (lt *lockTable) acquireOne(ctx context.Context, k *logpb.ResourceKey) ([]predecessor, error) {
	id := commands.ResourceKeyID(k)
	lt.mu.Lock()
	if lt.closed {
		lt.mu.Unlock()
		return nil, errLocksClosed
	}
	if behind, ok := lt.tryAcquireLocked(id, k.Shared); ok {
		lt.mu.Unlock()
		return named(behind, k), nil
	}
	if err := ctx.Err(); err != nil {
		lt.dropIfIdleLocked(id)
		lt.mu.Unlock()
		return nil, err
	}
	w := &lockWaiter{shared: k.Shared, ready: make(chan struct{})}
	kl := lt.keys[id]
	kl.queue = append(kl.queue, w)
	lt.mu.Unlock()

	select {
	case <-w.ready:
		lt.mu.Lock()
		defer lt.mu.Unlock()
		if !w.granted { // closed table
			return nil, errLocksClosed
		}
		return named(w.behind, k), nil
	case <-ctx.Done():
	}
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if w.granted {
		// Granted while ctx ended: give it back (and let the next go).
		lt.releaseLocked(id, k.Shared)
		return nil, ctx.Err()
	}
	if lt.closed {
		return nil, errLocksClosed
	}
	kl = lt.keys[id]
	for i, q := range kl.queue {
		if q == w {
			kl.queue = append(kl.queue[:i:i], kl.queue[i+1:]...)
			break
		}
	}
	// The leaving waiter may have been the incompatible head that held
	// back compatible waiters behind it.
	kl.grantQueued()
	if kl.idle() {
		delete(lt.keys, id)
	}
	return nil, ctx.Err()
}

func (lt *lockTable) dropIfIdleLocked(id string) {
	if kl := lt.keys[id]; kl != nil && kl.idle() {
		delete(lt.keys, id)
	}
}

// lock acquires every key of keys (already normalized: sorted, deduplicated)
// in order. On failure it releases what it took, in reverse, and returns a
// *LockTimeoutError naming the key it waited on (or errLocksClosed).
// observe, if not nil, is told how long each key took.
func (lt *lockTable) lock(ctx context.Context, keys []*logpb.ResourceKey, observe func(k *logpb.ResourceKey, d time.Duration)) (*lockGuard, time.Duration, error) {
	g := &lockGuard{lt: lt, keys: keys}
	start := time.Now()
	for _, k := range keys {
		ks := time.Now()
		behind, err := lt.acquireOne(ctx, k)
		if err != nil {
			g.release()
			waited := time.Since(start)
			if err == errLocksClosed {
				return nil, waited, errNotLeader
			}
			return nil, waited, &LockTimeoutError{Key: KeyName(k), Waited: waited, Err: err}
		}
		g.held++
		g.addBehind(behind)
		if observe != nil {
			observe(k, time.Since(ks))
		}
	}
	return g, time.Since(start), nil
}

// tryLock takes every key at once or nothing (used to re-lock recovered
// tasks, which were admitted under these locks and so never conflict).
func (lt *lockTable) tryLock(keys []*logpb.ResourceKey) (*lockGuard, bool) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.closed {
		return nil, false
	}
	for i, k := range keys {
		if _, ok := lt.tryAcquireLocked(commands.ResourceKeyID(k), k.Shared); !ok {
			lt.dropIfIdleLocked(commands.ResourceKeyID(k))
			for j := i - 1; j >= 0; j-- {
				lt.releaseLocked(commands.ResourceKeyID(keys[j]), keys[j].Shared)
			}
			return nil, false
		}
	}
	return &lockGuard{lt: lt, keys: keys, held: len(keys)}, true
}

// close ends the table: every waiter is woken with errLocksClosed and later
// acquisitions fail. Guards released afterwards are no-ops.
func (lt *lockTable) close() {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	if lt.closed {
		return
	}
	lt.closed = true
	for _, kl := range lt.keys {
		for _, w := range kl.queue {
			close(w.ready)
		}
		kl.queue = nil
	}
	lt.keys = map[string]*keyLock{}
}

// holders reports the holders of one key (tests and diagnostics).
func (lt *lockTable) holders(k *logpb.ResourceKey) (shared int, exclusive bool, waiting int) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	kl := lt.keys[commands.ResourceKeyID(k)]
	if kl == nil {
		return 0, false, 0
	}
	return kl.shared, kl.exclusive, len(kl.queue)
}

// size is the number of keys with holders or waiters.
func (lt *lockTable) size() int {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return len(lt.keys)
}

// lockGuard holds the first `held` keys of keys until release, which is
// idempotent; handOff gives them on early (handoff.go).
type lockGuard struct {
	lt   *lockTable
	keys []*logpb.ResourceKey
	held int
	// behind are the conflicting tasks that were still finishing on some
	// key when it was granted: the holder is ordered behind them.
	behind []predecessor

	// Under lt.mu.
	released  bool
	handedOff *finishingTask
}

func (g *lockGuard) release() {
	if g == nil {
		return
	}
	g.lt.mu.Lock()
	defer g.lt.mu.Unlock()
	if g.released {
		return
	}
	g.released = true
	if f := g.handedOff; f != nil {
		g.lt.forgetFinishingLocked(g.keys[:g.held], f)
		close(f.done)
		return
	}
	if g.lt.closed {
		return
	}
	for i := g.held - 1; i >= 0; i-- {
		g.lt.releaseLocked(commands.ResourceKeyID(g.keys[i]), g.keys[i].Shared)
	}
}
