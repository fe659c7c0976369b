package main

import (
	"fmt"
	"time"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// profile is the seeded state's shape (docs/scaling.md#milvus-max): the
// flags size it, so the same run works at a few thousand segments and at
// Milvus's documented maximum.
type profile struct {
	Segments   int
	VChannels  int
	PChannels  int
	Tombstones int
}

// seedInfo is what the load needs to know about the seeded state without
// asking the cluster: every VChannel by PChannel, and flushed segments
// whose manifest pointers the state holds.
type seedInfo struct {
	File        string
	Index       uint64
	NextID      uint64
	Bytes       int64
	Build       time.Duration // fsm.Synthetic
	Write       time.Duration // snapshot into the backup file
	Collections int
	ByPChannel  map[string][]string // VChannels of each PChannel
	Flushed     []int64             // a sample of segments with manifest pointers
	SegStates   map[string]int      // segments by state
}

// writeSeed builds the synthetic state and writes it as a backup file at
// path, the input of `coordd restore` (docs/operations.md#backup-and-restore).
func writeSeed(path string, p profile) (*seedInfo, error) {
	start := time.Now()
	st, err := fsm.Synthetic(fsm.SyntheticShape{Segments: p.Segments, VChannels: p.VChannels,
		Tombstones: p.Tombstones, PChannels: p.PChannels, ManifestPointers: true})
	if err != nil {
		return nil, fmt.Errorf("synthesize the state: %w", err)
	}
	info := &seedInfo{File: path, Index: st.AppliedIndex(), NextID: st.NextID(), Build: time.Since(start),
		ByPChannel: map[string][]string{}, SegStates: map[string]int{}}
	for _, c := range st.Collections() {
		info.Collections++
		for _, v := range c.Vchannels {
			pc := vocab.PChannelOf(v)
			info.ByPChannel[pc] = append(info.ByPChannel[pc], v)
		}
		if len(info.Flushed) < 4096 {
			for _, g := range st.SegmentsOfCollection(c.CollectionId) {
				if g.ManifestPath != "" && g.State == logpb.SegmentState_SEGMENT_FLUSHED {
					info.Flushed = append(info.Flushed, g.ID)
				}
			}
		}
	}
	for _, s := range []logpb.SegmentState{logpb.SegmentState_SEGMENT_GROWING, logpb.SegmentState_SEGMENT_SEALED,
		logpb.SegmentState_SEGMENT_FLUSHING, logpb.SegmentState_SEGMENT_FLUSHED, logpb.SegmentState_SEGMENT_DROPPED} {
		info.SegStates[s.String()] = st.SegmentCountIn(s)
	}
	start = time.Now()
	n, err := backup.WriteState(path, st, backup.Header{ClusterID: "milvus-max-synthetic", LeaderID: "synthetic",
		Index: info.Index, Term: 1, CreatedUnixMs: time.Now().UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("seed backup: %w", err)
	}
	info.Write, info.Bytes = time.Since(start), n
	return info, nil
}
