package main

import (
	"context"
	"flag"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/api/metrics"
	"github.com/coordd/coordd/controller/manifest"
	"github.com/coordd/coordd/objectstore"
)

// manifestFlags configure segment manifest commits
// (docs/semantics.md#manifests): where revisions are written and how the
// orphan collector runs.
type manifestFlags struct {
	ObjectStore             string
	GCInterval, GCGrace     time.Duration
	TestOnlyPauseAfterWrite time.Duration
}

func (m *manifestFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&m.ObjectStore, "object-store", "",
		"object store for segment manifest revisions (the binlogs' store: a directory or file:// / s3:// URL); empty disables manifest commits")
	fs.DurationVar(&m.GCInterval, "manifest-gc-interval", time.Minute, "how often the leader collects orphan manifest revisions")
	fs.DurationVar(&m.GCGrace, "manifest-gc-grace", 10*time.Minute, "how old an unpublished manifest revision must be before it is collected")
	fs.DurationVar(&m.TestOnlyPauseAfterWrite, "test-only-manifest-pause-after-write", 0,
		"TEST ONLY: wait this long between writing a manifest revision and proposing its publication, so a test can kill the leader there")
}

func (m manifestFlags) validate() error {
	if m.GCInterval < 100*time.Millisecond {
		return badConfig("--manifest-gc-interval must be at least 100ms, got %v", m.GCInterval)
	}
	if m.GCGrace < time.Second {
		return badConfig("--manifest-gc-grace must be at least 1s, got %v", m.GCGrace)
	}
	if m.TestOnlyPauseAfterWrite < 0 || m.TestOnlyPauseAfterWrite > time.Minute {
		return badConfig("--test-only-manifest-pause-after-write must be in 0..1m, got %v", m.TestOnlyPauseAfterWrite)
	}
	return nil
}

// config opens the object store and builds the committer's configuration.
func (m manifestFlags) config(reg *metrics.Registry, logger hclog.Logger) (manifest.Config, error) {
	met, err := manifest.NewMetrics(reg.Registerer())
	if err != nil {
		return manifest.Config{}, err
	}
	cfg := manifest.Config{GCInterval: m.GCInterval, GCGrace: m.GCGrace, Metrics: met,
		Logger: logger.Named("manifest"), TestOnlyPauseAfterWrite: m.TestOnlyPauseAfterWrite}
	if m.TestOnlyPauseAfterWrite > 0 {
		logger.Warn("TEST ONLY: manifest commits pause between revision write and proposal (--test-only-manifest-pause-after-write)")
	}
	if m.ObjectStore == "" {
		return cfg, nil
	}
	if cfg.Store, err = objectstore.Open(context.Background(), m.ObjectStore); err != nil {
		return manifest.Config{}, badConfig("--object-store: %v", err)
	}
	return cfg, nil
}
