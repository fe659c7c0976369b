package raftnode

import (
	"errors"

	"github.com/coordd/coordd/raftnode/datadir"
)

// OpenStorage checks and opens cfg.DataDir for member cfg.ID with cfg's
// storage knobs (datadir.Open: it refuses a data dir locked by another
// process, created for another member, that lost its raft state or whose
// storage is damaged). It binds no port, so a server can refuse a bad data
// dir before it listens anywhere; pass the result as Config.Storage.
func OpenStorage(cfg Config) (*datadir.Storage, error) {
	cfg = cfg.withDefaults()
	if cfg.ID == "" || cfg.DataDir == "" {
		return nil, errors.New("raftnode: ID and DataDir are required")
	}
	return datadir.Open(datadir.Options{
		ID: cfg.ID, Dir: cfg.DataDir, LogStore: cfg.LogStore, WALSegmentSize: cfg.WALSegmentSize,
		BoltOptions: cfg.BoltOptions, Logger: cfg.Logger, TestOnlySkipIdentityCheck: cfg.TestOnlySkipIdentityCheck,
	})
}
