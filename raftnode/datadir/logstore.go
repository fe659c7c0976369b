package datadir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"
	gometrics "github.com/hashicorp/go-metrics"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
)

// Log stores a member can keep its raft log in (--raft-log-store). The
// stable store (current term, vote) is raft.db in both cases: only where the
// entries live differs.
const (
	// LogStoreBolt keeps the log in raft.db (raft-boltdb/v2): one bolt
	// transaction, two fdatasyncs, per append.
	LogStoreBolt = "bolt"
	// LogStoreWAL keeps the log in segment files under wal/ (raft-wal):
	// one fsync per append into a preallocated segment.
	LogStoreWAL = "wal"
)

// DefaultLogStore is the log store a data dir with no raft state gets when
// none is asked for: raft-wal, which won the cluster benchmarks on both
// workloads bound by the log's round (bench/RESULTS.md, runs S-V), the
// same default Consul has for new servers. A data dir that already holds
// raft state keeps the store it records (docs/operations.md#raft-log-store).
const DefaultLogStore = LogStoreWAL

// WALDir is the directory under a data dir holding the raft-wal segments
// and their metadata (wal-meta.db).
const WALDir = "wal"

// walMetaFile is raft-wal's bolt file listing the segments.
const walMetaFile = "wal-meta.db"

// keyLogStore is the raft.db stable-store key recording which log store
// the data dir uses. Data dirs written before it existed hold no such key:
// their log is in raft.db.
var keyLogStore = []byte("coordd.LogStore")

// ValidLogStore reports whether name is a log store a member can run on.
func ValidLogStore(name string) bool { return name == LogStoreBolt || name == LogStoreWAL }

// LogStoreMismatchError refuses to open a data dir with a log store other
// than the one its log is in: the other store would start from an empty log
// while the term and vote say the member voted and acknowledged entries.
type LogStoreMismatchError struct {
	Dir       string
	Recorded  string
	Requested string
}

func (e *LogStoreMismatchError) Error() string {
	return fmt.Sprintf("data dir %s keeps its raft log in the %s log store, not --raft-log-store %s: start it with --raft-log-store %s, "+
		"or move it to %s by replacing the member (docs/operations.md#raft-log-store)",
		e.Dir, e.Recorded, e.Requested, e.Recorded, e.Requested)
}

// recordedLogStore is the log store a checked data dir uses ("" when it has
// no raft state yet and so may take either).
func (r storageReport) recordedLogStore() string {
	switch {
	case r.logStore != "":
		return r.logStore
	case r.walPresent:
		return LogStoreWAL
	case r.hasTerm || r.lastIndex > 0 || r.snapshots > 0:
		return LogStoreBolt // written before the key existed
	}
	return ""
}

// chooseLogStore decides which log store to open: the recorded one, which a
// request for the other is refused against; the requested one
// (DefaultLogStore when none) for a data dir with no raft state.
func chooseLogStore(dir, requested string, rep storageReport) (string, error) {
	if requested != "" && !ValidLogStore(requested) {
		return "", fmt.Errorf("raftnode: unknown log store %q (want %s or %s)", requested, LogStoreBolt, LogStoreWAL)
	}
	rec := rep.recordedLogStore()
	switch {
	case rec != "" && requested != "" && rec != requested:
		return "", &LogStoreMismatchError{Dir: dir, Recorded: rec, Requested: requested}
	case rec != "":
		return rec, nil
	case requested != "":
		return requested, nil
	}
	return DefaultLogStore, nil
}

// openWAL opens (or creates) the raft-wal log under dir/wal. A segment size
// of 0 takes raft-wal's default (64 MiB).
func openWAL(dir string, segmentSize int, logger hclog.Logger) (*raftwal.WAL, error) {
	wd := filepath.Join(dir, WALDir)
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", wd, err)
	}
	w, err := raftwal.Open(wd, raftwal.WithLogger(hclogOrNull(logger).Named("wal")), raftwal.WithSegmentSize(segmentSize),
		raftwal.WithMetricsCollector(walMetrics{}))
	if err != nil {
		return nil, fmt.Errorf("open %s log store in %s: %w", LogStoreWAL, wd, err)
	}
	return w, nil
}

// recordLogStore writes the chosen store into raft.db once, before the
// first entry is stored, so a later open with the other store is refused.
func recordLogStore(stable *raftboltdb.BoltStore, name string) error {
	cur, err := stable.Get(keyLogStore)
	if err != nil && err.Error() != "not found" {
		return fmt.Errorf("read the recorded log store: %w", err)
	}
	if string(cur) == name {
		return nil
	}
	if len(cur) > 0 {
		return errors.New("raftnode: the recorded log store cannot change")
	}
	if err := stable.Set(keyLogStore, []byte(name)); err != nil {
		return fmt.Errorf("record the log store: %w", err)
	}
	return nil
}

// walMetrics passes raft-wal's counters and gauges to the process's
// go-metrics sink as raft.wal.* (coordd_raft_wal_* on /metrics), beside
// raft's and raft-boltdb's. It looks the sink up on every observation, as
// raft does, so a sink installed after the log store opened still gets
// them (raft-wal's own collector binds the sink it finds when built).
type walMetrics struct{}

func (walMetrics) IncrementCounter(name string, delta uint64) {
	gometrics.IncrCounter([]string{"raft", "wal", name}, float32(delta))
}

func (walMetrics) SetGauge(name string, val uint64) {
	gometrics.SetGauge([]string{"raft", "wal", name}, float32(val))
}
