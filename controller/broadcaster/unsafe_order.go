package broadcaster

import (
	"context"
	"math/rand/v2"
	"time"
)

// unsafeAppendJitter is the most a broken broadcaster
// (Config.UnsafeReleaseKeysAtCreate) delays each append. Releasing the keys
// alone lets conflicting tasks overlap, but an append on loopback takes well
// under a raft round, so an earlier task has usually finished appending
// before a later one is created and the overtaking the lock prevents stays
// rare; a random delay per append, as a slow network adds, makes it show
// within seconds. A correct broadcaster is immune to it: its lock admits a
// conflicting task only after the earlier one completed.
const unsafeAppendJitter = 20 * time.Millisecond

// unsafeJitter waits a random part of unsafeAppendJitter when the
// broadcaster is broken on purpose, and returns at once otherwise.
func (ts *termState) unsafeJitter(ctx context.Context) {
	if !ts.m.cfg.UnsafeReleaseKeysAtCreate {
		return
	}
	select {
	case <-ts.m.cfg.Clock.After(rand.N(unsafeAppendJitter)):
	case <-ctx.Done():
	}
}
