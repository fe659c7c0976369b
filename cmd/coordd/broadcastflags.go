package main

import (
	"flag"
	"time"
)

// broadcastFlags configure the broadcaster's tombstone retention, which is
// also the idempotency window (docs/semantics.md#tombstones; defaults in
// docs/semantics.md#defaults-and-limits).
type broadcastFlags struct {
	TombstoneMaxCount      int
	TombstoneMaxLifetime   time.Duration
	TombstoneCheckInterval time.Duration
}

func (b *broadcastFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&b.TombstoneMaxCount, "broadcast-tombstone-max-count", 8192, "finished broadcasts kept (the idempotency window by count)")
	fs.DurationVar(&b.TombstoneMaxLifetime, "broadcast-tombstone-max-lifetime", 24*time.Hour, "how long finished broadcasts are kept, in replicated time (the idempotency window by age)")
	fs.DurationVar(&b.TombstoneCheckInterval, "broadcast-tombstone-check-interval", 5*time.Minute, "how often old tombstones are pruned")
}

func (b broadcastFlags) validate() error {
	if b.TombstoneMaxCount < 1 || b.TombstoneMaxCount > 1<<20 {
		return badConfig("--broadcast-tombstone-max-count must be in 1..%d, got %d", 1<<20, b.TombstoneMaxCount)
	}
	if b.TombstoneMaxLifetime < time.Second {
		return badConfig("--broadcast-tombstone-max-lifetime must be at least 1s, got %v", b.TombstoneMaxLifetime)
	}
	if b.TombstoneCheckInterval < 100*time.Millisecond {
		return badConfig("--broadcast-tombstone-check-interval must be at least 100ms, got %v", b.TombstoneCheckInterval)
	}
	return nil
}
