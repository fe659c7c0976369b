package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// Segments and channel checkpoints.

var segmentGroup = &group{name: "segment", summary: "inspect segments", cmds: []*command{
	{name: "list", args: "", summary: "list segments (filter with --collection, --vchannel, --state)", bind: bindSegmentList},
	{name: "get", args: "SEGMENT_ID", summary: "show one segment with its positions and every insert binlog object", bind: bindSegmentGet},
}}

var checkpointGroup = &group{name: "checkpoint", summary: "inspect VChannel checkpoints", cmds: []*command{
	{name: "list", args: "", summary: "list VChannel checkpoints with their lag (filter with --collection)", bind: bindCheckpointList},
}}

// segmentStates are the states a segment can be in.
var segmentStates = []string{"Growing", "Sealed", "Flushing", "Flushed", "Dropped", "Importing"}

type positionJSON struct {
	Term      int64  `json:"term"`
	Offset    uint64 `json:"offset"`
	Timestamp uint64 `json:"timestamp"`
}

func toPositionJSON(p *coordpb.Position) *positionJSON {
	if p == nil {
		return nil
	}
	return &positionJSON{Term: p.Term, Offset: p.Offset, Timestamp: p.Timestamp}
}

func positionString(p *coordpb.Position) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d@%d", p.Term, p.Offset, p.Timestamp)
}

type segmentJSON struct {
	SegmentID       int64         `json:"segment_id"`
	CollectionID    int64         `json:"collection_id"`
	PartitionID     int64         `json:"partition_id"`
	VChannel        string        `json:"vchannel"`
	Level           string        `json:"level"`
	State           string        `json:"state"`
	RowCount        int64         `json:"row_count"`
	SizeBytes       int64         `json:"size_bytes"`
	StartPosition   *positionJSON `json:"start_position"`
	DMLPosition     *positionJSON `json:"dml_position"`
	SealTs          uint64        `json:"seal_ts"`
	SealReason      string        `json:"seal_reason"`
	StorageVersion  uint32        `json:"storage_version"`
	ManifestPath    string        `json:"manifest_path"`
	BinlogFileCount int64         `json:"binlog_file_count"`
	CreatedUnixMs   int64         `json:"created_unix_ms"`
	DroppedUnixMs   int64         `json:"dropped_unix_ms"`
}

// segmentGetJSON is what 'segment get' prints: the list fields plus every
// insert binlog object. binlog_paths is always present ([] for a segment
// that has none yet), so scripts can rely on the field.
type segmentGetJSON struct {
	segmentJSON
	BinlogPaths []string `json:"binlog_paths"`
}

func toSegmentJSON(s *coordpb.SegmentInfo) segmentJSON {
	out := segmentJSON{SegmentID: s.SegmentId, CollectionID: s.CollectionId, PartitionID: s.PartitionId, VChannel: s.Vchannel,
		Level: s.Level, State: s.State, RowCount: s.NumOfRows, SizeBytes: s.SizeBytes, StartPosition: toPositionJSON(s.StartPosition),
		DMLPosition: toPositionJSON(s.DmlPosition), SealTs: s.SealTs, SealReason: s.SealReason, StorageVersion: s.StorageVersion,
		ManifestPath: s.ManifestPath, BinlogFileCount: s.BinlogFileCount, CreatedUnixMs: s.CreatedUnixMs, DroppedUnixMs: s.DroppedUnixMs}
	return out
}

func toSegmentGetJSON(s *coordpb.SegmentInfo) segmentGetJSON {
	out := segmentGetJSON{segmentJSON: toSegmentJSON(s), BinlogPaths: append([]string{}, s.BinlogPaths...)}
	if len(out.BinlogPaths) == 0 {
		// Derive the keys from the log IDs if the server did not list them.
		for _, fb := range s.FieldBinlogs {
			for _, b := range fb.Binlogs {
				p := b.Path
				if p == "" {
					p = fmt.Sprintf("insert_log/%d/%d/%d/%d/%d", s.CollectionId, s.PartitionId, s.SegmentId, fb.FieldId, b.LogId)
				}
				out.BinlogPaths = append(out.BinlogPaths, p)
			}
		}
	}
	return out
}

type segmentsJSON struct {
	Segments []segmentJSON `json:"segments"`
}

func bindSegmentList(fs *flag.FlagSet) func([]string) (action, error) {
	coll := fs.Int64("collection", 0, "only segments of collection `ID`")
	vch := fs.String("vchannel", "", "only segments of `VCHANNEL`")
	state := fs.String("state", "", "only segments in `STATE`: "+strings.Join(segmentStates, ", "))
	stale := fs.Bool("stale", false, "serve from the answering node's replica instead of the leader")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		if *coll < 0 {
			return action{}, fmt.Errorf("--collection must be a positive integer, got %d", *coll)
		}
		if *vch != "" {
			if err := checkVChannel(*vch); err != nil {
				return action{}, err
			}
		}
		st := ""
		if *state != "" {
			for _, s := range segmentStates {
				if strings.EqualFold(s, *state) {
					st = s
				}
			}
			if st == "" {
				return action{}, fmt.Errorf("--state %q: want one of %s", *state, strings.Join(segmentStates, ", "))
			}
		}
		req := &coordpb.ListSegmentsRequest{Consistency: consistencyOf(*stale), CollectionId: *coll, Vchannel: *vch, State: st}
		return action{what: "segment list", run: func(ctx context.Context, e *env) error {
			segs, err := e.c.ListSegments(ctx, req)
			if err != nil {
				return err
			}
			out := segmentsJSON{Segments: []segmentJSON{}}
			for _, s := range segs {
				out.Segments = append(out.Segments, toSegmentJSON(s))
			}
			return e.show(out, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "SEGMENT\tCOLLECTION\tPARTITION\tVCHANNEL\tLEVEL\tSTATE\tROWS\tSEAL_TS\tSEAL_REASON")
				for _, s := range segs {
					fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", s.SegmentId, s.CollectionId, s.PartitionId, s.Vchannel,
						s.Level, s.State, s.NumOfRows, s.SealTs, dash(s.SealReason))
				}
				return tw.Flush()
			})
		}}, nil
	}
}

func bindSegmentGet(fs *flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "SEGMENT_ID"); err != nil {
			return action{}, err
		}
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id <= 0 {
			return action{}, fmt.Errorf("SEGMENT_ID must be a positive integer, got %q", args[0])
		}
		return action{what: "segment get", run: func(ctx context.Context, e *env) error {
			resp, err := e.c.GetSegmentInfo(ctx, []int64{id}, true)
			if err != nil {
				return err
			}
			if len(resp.Segments) != 1 {
				return fmt.Errorf("the server returned %d segments for one id", len(resp.Segments))
			}
			s := toSegmentGetJSON(resp.Segments[0])
			return e.show(s, func(w io.Writer) error {
				tw := newTable(w)
				for _, kv := range [][2]string{
					{"segment", strconv.FormatInt(s.SegmentID, 10)}, {"collection", strconv.FormatInt(s.CollectionID, 10)},
					{"partition", strconv.FormatInt(s.PartitionID, 10)}, {"vchannel", s.VChannel}, {"level", s.Level}, {"state", s.State},
					{"rows", strconv.FormatInt(s.RowCount, 10)}, {"size_bytes", strconv.FormatInt(s.SizeBytes, 10)},
					{"start_position", positionString(resp.Segments[0].StartPosition)}, {"dml_position", positionString(resp.Segments[0].DmlPosition)},
					{"seal_ts", strconv.FormatUint(s.SealTs, 10)}, {"seal_reason", dash(s.SealReason)},
				} {
					fmt.Fprintf(tw, "%s\t%s\n", kv[0], kv[1])
				}
				for _, p := range s.BinlogPaths {
					fmt.Fprintf(tw, "binlog\t%s\n", p)
				}
				return tw.Flush()
			})
		}}, nil
	}
}

type channelCheckpointJSON struct {
	VChannel     string        `json:"vchannel"`
	PChannelTerm int64         `json:"pchannel_term"`
	Position     *positionJSON `json:"position"`
	Dropped      bool          `json:"dropped"`
	NodeID       uint64        `json:"node_id"`
	LagMs        int64         `json:"lag_ms"`
}

func toChannelCheckpointJSON(cp *coordpb.ChannelCheckpoint) channelCheckpointJSON {
	return channelCheckpointJSON{VChannel: cp.Vchannel, PChannelTerm: cp.PchannelTerm, Position: toPositionJSON(cp.Position),
		Dropped: cp.Dropped, NodeID: cp.NodeId, LagMs: cp.LagMs}
}

type channelCheckpointsJSON struct {
	Checkpoints []channelCheckpointJSON `json:"checkpoints"`
}

func bindCheckpointList(fs *flag.FlagSet) func([]string) (action, error) {
	coll := fs.Int64("collection", 0, "only VChannels of collection `ID`")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		if *coll < 0 {
			return action{}, fmt.Errorf("--collection must be a positive integer, got %d", *coll)
		}
		c := *coll
		return action{what: "checkpoint list", run: func(ctx context.Context, e *env) error {
			cps, err := e.c.ListChannelCheckpoints(ctx, c)
			if err != nil {
				return err
			}
			out := channelCheckpointsJSON{Checkpoints: []channelCheckpointJSON{}}
			for _, cp := range cps {
				out.Checkpoints = append(out.Checkpoints, toChannelCheckpointJSON(cp))
			}
			return e.show(out, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "VCHANNEL\tPOSITION\tLAG_MS\tNODE\tTERM\tDROPPED")
				for _, cp := range cps {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%v\n", cp.Vchannel, positionString(cp.Position), cp.LagMs, nodeID(cp.NodeId),
						cp.PchannelTerm, cp.Dropped)
				}
				return tw.Flush()
			})
		}}, nil
	}
}

// checkVChannel accepts a VChannel name (not a PChannel or the CChannel).
func checkVChannel(v string) error {
	if err := vocab.ValidateVChannelName(v); err != nil || vocab.IsCChannel(v) {
		return fmt.Errorf("%q is not a VChannel name (<pchannel>_<collection>v<shard>)", v)
	}
	return nil
}
