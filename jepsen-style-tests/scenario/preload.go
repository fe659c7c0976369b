package scenario

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/fsm"
)

// A preloaded scenario's members start from a synthetic state the size of
// a large Milvus deployment (fsm.Synthetic, the state bench/scale seeds;
// docs/scaling.md#milvus-max) instead of an empty one, so every snapshot,
// install and restart moves and decodes tens of MB.

// preloadFile is the backup a run's cluster is restored from, and what it
// holds.
type preloadFile struct {
	Path     string
	Bytes    int64
	Index    uint64 // raft index of the state
	IDFloor  uint64 // `coordd restore --id-floor`: above every ID the state holds
	Segments int
	Build    time.Duration // synthesize and write the file
}

// writePreload synthesizes shape and writes it into dir as a backup file,
// the input of `coordd restore` (docs/operations.md#backup-and-restore).
func writePreload(dir string, shape fsm.SyntheticShape) (*preloadFile, error) {
	t0 := time.Now()
	st, err := fsm.Synthetic(shape)
	if err != nil {
		return nil, fmt.Errorf("synthesize the preloaded state: %w", err)
	}
	pf := &preloadFile{Path: filepath.Join(dir, "preload.backup"), Index: st.AppliedIndex(), IDFloor: st.NextID() + 1,
		Segments: shape.Segments}
	n, err := backup.WriteState(pf.Path, st, backup.Header{ClusterID: "jepsen-preload", LeaderID: "synthetic", Index: pf.Index, Term: 1,
		CreatedUnixMs: time.Now().UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("preload backup: %w", err)
	}
	pf.Bytes, pf.Build = n, time.Since(t0)
	return pf, nil
}
