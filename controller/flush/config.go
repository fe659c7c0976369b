package flush

import (
	"fmt"
	"time"

	"github.com/coordd/coordd/commands"
)

// Config holds the seal and allocation policy. Zero fields take the
// defaults (docs/semantics.md#defaults-and-limits).
type Config struct {
	// SegmentMaxSize is a segment's nominal size; a segment is sealed once
	// its bytes reach SegmentMaxSize × SealProportion × jitter, jitter in
	// [1-SealProportionJitter, 1] (per segment, from its ID).
	SegmentMaxSize       int64
	SealProportion       float64
	SealProportionJitter float64
	// MaxLifetime seals a growing segment this long after its creation.
	MaxLifetime time.Duration
	// MaxIdle seals a segment without writes for this long if it holds more
	// than MinSizeFromIdleToSealed bytes.
	MaxIdle                 time.Duration
	MinSizeFromIdleToSealed int64
	// MaxBinlogFiles seals a segment with this many binlogs in a field.
	MaxBinlogFiles int
	// ChannelGrowingBytes: when a VChannel's growing segments hold more,
	// the largest are sealed until it is below.
	ChannelGrowingBytes int64
	// AllocationExpiry is how long an allocation may be used.
	AllocationExpiry time.Duration
	// Interval between seal/flush rounds (time-tick reports also trigger one).
	Interval time.Duration
	// DroppedRetention: Dropped segments are forgotten this long after
	// their drop (at most PruneBatch per round).
	DroppedRetention time.Duration
}

// Defaults (Milvus's, docs/semantics.md#defaults-and-limits).
const (
	DefaultSegmentMaxSize          = 1024 << 20
	DefaultSealProportion          = 0.12
	DefaultSealProportionJitter    = 0.1
	DefaultMaxLifetime             = 24 * time.Hour
	DefaultMaxIdle                 = 600 * time.Second
	DefaultMinSizeFromIdleToSealed = 16 << 20
	DefaultMaxBinlogFiles          = 32
	DefaultChannelGrowingBytes     = 4096 << 20
	DefaultAllocationExpiry        = 2 * time.Second
	DefaultInterval                = time.Second
	DefaultDroppedRetention        = 3 * time.Hour
	// PruneBatch bounds the segments one prune command forgets.
	PruneBatch = 1024
	// PruneVChannelBatch bounds the dropped VChannels one prune command
	// forgets: a record each, and the apply's cost is one pass over the
	// checkpoints whatever the batch, so a larger batch frees a bulk drop
	// in fewer rounds (65,536 dropped collections: 16 rounds).
	PruneVChannelBatch = commands.MaxVChannelsPerPrune
)

// WithDefaults fills zero fields.
func (c Config) WithDefaults() Config {
	if c.SegmentMaxSize <= 0 {
		c.SegmentMaxSize = DefaultSegmentMaxSize
	}
	if c.SealProportion <= 0 {
		c.SealProportion = DefaultSealProportion
	}
	if c.SealProportionJitter <= 0 {
		c.SealProportionJitter = DefaultSealProportionJitter
	}
	if c.MaxLifetime <= 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	if c.MaxIdle <= 0 {
		c.MaxIdle = DefaultMaxIdle
	}
	if c.MinSizeFromIdleToSealed <= 0 {
		c.MinSizeFromIdleToSealed = DefaultMinSizeFromIdleToSealed
	}
	if c.MaxBinlogFiles <= 0 {
		c.MaxBinlogFiles = DefaultMaxBinlogFiles
	}
	if c.ChannelGrowingBytes <= 0 {
		c.ChannelGrowingBytes = DefaultChannelGrowingBytes
	}
	if c.AllocationExpiry <= 0 {
		c.AllocationExpiry = DefaultAllocationExpiry
	}
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.DroppedRetention <= 0 {
		c.DroppedRetention = DefaultDroppedRetention
	}
	return c
}

// Check reports values that cannot work.
func (c Config) Check() error {
	if c.SealProportion > 1 || c.SealProportionJitter >= 1 {
		return fmt.Errorf("seal proportion must be in (0, 1] and its jitter in [0, 1), got %v and %v", c.SealProportion, c.SealProportionJitter)
	}
	return nil
}

// Capacity is segment id's byte budget: deterministic in the ID, so every
// leader computes the same one.
func (c Config) Capacity(id int64) int64 {
	// A fixed mix of the ID bits to [0, 1).
	x := uint64(id) * 0x9E3779B97F4A7C15
	x ^= x >> 29
	frac := float64(x>>11) / float64(1<<53)
	return int64(float64(c.SegmentMaxSize) * c.SealProportion * (1 - c.SealProportionJitter*frac))
}
