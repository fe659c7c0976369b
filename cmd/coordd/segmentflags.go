package main

import (
	"flag"
	"time"

	"github.com/coordd/coordd/controller/flush"
)

// segmentFlags configure segment allocation and the seal policy
// (docs/semantics.md#segments; defaults in
// docs/semantics.md#defaults-and-limits).
type segmentFlags struct {
	MaxSizeMB               int64
	SealProportion          float64
	SealProportionJitter    float64
	MaxLife                 time.Duration
	MaxIdle                 time.Duration
	MinSizeFromIdleToSealed int64
	MaxBinlogFiles          int
	ChannelGrowingMB        int64
	AssignmentExpiration    time.Duration
	CheckInterval           time.Duration
	DroppedRetention        time.Duration
}

func (s *segmentFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&s.MaxSizeMB, "segment-max-size-mb", flush.DefaultSegmentMaxSize>>20, "nominal segment size in MiB")
	fs.Float64Var(&s.SealProportion, "segment-seal-proportion", flush.DefaultSealProportion, "seal a segment at this fraction of its nominal size")
	fs.Float64Var(&s.SealProportionJitter, "segment-seal-proportion-jitter", flush.DefaultSealProportionJitter, "per-segment jitter subtracted from the seal proportion (0..1)")
	fs.DurationVar(&s.MaxLife, "segment-max-life", flush.DefaultMaxLifetime, "seal a growing segment this long after its creation")
	fs.DurationVar(&s.MaxIdle, "segment-max-idle", flush.DefaultMaxIdle, "seal a segment without writes for this long (if it is big enough)")
	fs.Int64Var(&s.MinSizeFromIdleToSealed, "segment-min-size-from-idle-mb", flush.DefaultMinSizeFromIdleToSealed>>20, "an idle segment is sealed only above this size (MiB)")
	fs.IntVar(&s.MaxBinlogFiles, "segment-max-binlog-files", flush.DefaultMaxBinlogFiles, "seal a segment once a field has this many binlogs")
	fs.Int64Var(&s.ChannelGrowingMB, "segment-channel-growing-mb", flush.DefaultChannelGrowingBytes>>20, "seal the largest growing segments of a VChannel holding more than this (MiB)")
	fs.DurationVar(&s.AssignmentExpiration, "segment-assignment-expiration", flush.DefaultAllocationExpiry, "how long a segment allocation may be used")
	fs.DurationVar(&s.CheckInterval, "segment-check-interval", flush.DefaultInterval, "how often the leader checks seal policies and flushable segments")
	fs.DurationVar(&s.DroppedRetention, "segment-dropped-retention", flush.DefaultDroppedRetention, "how long a Dropped segment's record, and a dropped VChannel's checkpoint, are kept before they are forgotten")
}

func (s segmentFlags) validate() error {
	switch {
	case s.MaxSizeMB < 1:
		return badConfig("--segment-max-size-mb must be at least 1, got %d", s.MaxSizeMB)
	case s.SealProportion <= 0 || s.SealProportion > 1:
		return badConfig("--segment-seal-proportion must be in (0, 1], got %v", s.SealProportion)
	case s.SealProportionJitter < 0 || s.SealProportionJitter >= 1:
		return badConfig("--segment-seal-proportion-jitter must be in [0, 1), got %v", s.SealProportionJitter)
	case s.MaxLife < time.Second || s.MaxIdle < time.Second:
		return badConfig("--segment-max-life and --segment-max-idle must be at least 1s")
	case s.MinSizeFromIdleToSealed < 0 || s.ChannelGrowingMB < 1 || s.MaxBinlogFiles < 1:
		return badConfig("--segment-min-size-from-idle-mb must not be negative, --segment-channel-growing-mb and --segment-max-binlog-files must be positive")
	case s.DroppedRetention < time.Second:
		return badConfig("--segment-dropped-retention must be at least 1s, got %v", s.DroppedRetention)
	case s.AssignmentExpiration < 10*time.Millisecond || s.CheckInterval < 10*time.Millisecond:
		return badConfig("--segment-assignment-expiration and --segment-check-interval must be at least 10ms")
	}
	return nil
}

func (s segmentFlags) config() flush.Config {
	return flush.Config{
		SegmentMaxSize: s.MaxSizeMB << 20, SealProportion: s.SealProportion, SealProportionJitter: s.SealProportionJitter,
		MaxLifetime: s.MaxLife, MaxIdle: s.MaxIdle, MinSizeFromIdleToSealed: s.MinSizeFromIdleToSealed << 20,
		MaxBinlogFiles: s.MaxBinlogFiles, ChannelGrowingBytes: s.ChannelGrowingMB << 20,
		AllocationExpiry: s.AssignmentExpiration, Interval: s.CheckInterval, DroppedRetention: s.DroppedRetention,
	}
}
