package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/vocab"
)

// The write path: insert rows, flush a collection, recovery information.

var insertGroup = &group{name: "insert", summary: "write rows to a collection's VChannels", cmds: []*command{
	{name: "", args: "COLLECTION_ID ROWS", summary: "write ROWS rows (1..65536: one allocated primary-key range) spread over the collection's VChannels; returns once the WALs hold them",
		notes: insertNotes, bind: bindInsert},
}}

var flushGroup = &group{name: "flush", summary: "seal and flush a collection's growing segments", cmds: []*command{
	{name: "", args: "COLLECTION_ID", summary: "seal every growing segment of the collection at a fresh flush timestamp; with --wait, follow until everything is persisted", bind: bindFlush},
}}

var recoveryInfoGroup = &group{name: "recovery-info", summary: "what a new owner of a VChannel resumes from", cmds: []*command{
	{name: "", args: "VCHANNEL", summary: "show the seek position and the unflushed, flushed, dropped and L0 segments of a VChannel", bind: bindRecoveryInfo},
}}

// insertNotes is the deadline and the failure semantics of insert
// (docs/semantics.md#insert-waits).
const insertNotes = `Deadline: --timeout plus 1s per 1,000 rows (default 5s: 10,000 rows wait up
to 15s), retries included; one message's attempt gets half of --timeout.
A wait for a moving or silent owner says which pchannel, whose, and when
coordd acts.

Not atomic: rows go to each VChannel separately, so a failed insert may be
partly written. Its error says how many rows were acknowledged and which
VChannels were not; unacknowledged rows may or may not be in the WAL.
Running it again allocates new primary keys and writes every row again.`

// insertDeadline is insert's bound: --timeout plus 1s per 1,000 rows (a
// large insert is many WAL messages; insertNotes says so in --help).
func insertDeadline(timeout time.Duration, rows uint64) time.Duration {
	return timeout + time.Duration(rows/1000)*time.Second
}

type insertJSON struct {
	CollectionID int64  `json:"collection_id"`
	FirstPK      int64  `json:"first_pk"`
	LastPK       int64  `json:"last_pk"`
	Count        uint32 `json:"count"`
	Messages     int    `json:"messages"`
	VChannels    int    `json:"vchannels"`
}

func bindInsert(fs *flag.FlagSet) func([]string) (action, error) {
	partition := fs.Int64("partition", 0, "partition `ID` of the rows")
	batch := fs.Int("batch", client.DefaultInsertBatch, "at most `N` rows per WAL message")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 2, 2, "COLLECTION_ID ROWS"); err != nil {
			return action{}, err
		}
		coll, err := parseCollectionID(args[0])
		if err != nil {
			return action{}, err
		}
		rows, err := strconv.ParseUint(args[1], 10, 32)
		if err != nil || rows == 0 || rows > client.MaxAllocCount {
			return action{}, fmt.Errorf("ROWS must be an integer in 1..%d, got %q", client.MaxAllocCount, args[1])
		}
		if *partition < 0 {
			return action{}, fmt.Errorf("--partition must not be negative, got %d", *partition)
		}
		if *batch < 1 || *batch > 1<<20 {
			return action{}, fmt.Errorf("--batch must be in 1..%d, got %d", 1<<20, *batch)
		}
		part, b := *partition, *batch
		return action{what: "insert", mutates: true, run: func(ctx context.Context, e *env) error {
			ctx, cancel := context.WithTimeout(ctx, insertDeadline(e.timeout, rows))
			defer cancel()
			res, err := e.c.Insert(ctx, coll, part, uint32(rows), b)
			if err != nil {
				return err
			}
			return e.show(insertJSON{CollectionID: coll, FirstPK: res.FirstPK, LastPK: res.LastPK, Count: res.Count,
				Messages: res.Messages, VChannels: res.VChannels},
				sentence("Inserted %d rows into collection %d: primary keys %d..%d, %d messages over %d vchannels.\n",
					res.Count, coll, res.FirstPK, res.LastPK, res.Messages, res.VChannels))
		}}, nil
	}
}

type flushJSON struct {
	CollectionID      int64                   `json:"collection_id"`
	FlushTs           uint64                  `json:"flush_ts"`
	SealTimeUnixMs    int64                   `json:"seal_time_unix_ms"`
	SealedSegmentIDs  []int64                 `json:"sealed_segment_ids"`
	FlushedSegmentIDs []int64                 `json:"flushed_segment_ids"`
	Checkpoints       []channelCheckpointJSON `json:"channel_checkpoints"`
	Waited            bool                    `json:"waited"`
	Flushed           bool                    `json:"flushed"`
	SegmentsTotal     uint32                  `json:"segments_total"`
	SegmentsFlushed   uint32                  `json:"segments_flushed"`
	VChannelsTotal    uint32                  `json:"vchannels_total"`
	VChannelsFlushed  uint32                  `json:"vchannels_flushed"`
	Behind            []flushLagJSON          `json:"behind"`
}

type flushLagJSON struct {
	Kind         string `json:"kind"`
	SegmentID    int64  `json:"segment_id,omitempty"`
	VChannel     string `json:"vchannel,omitempty"`
	State        string `json:"state"`
	CheckpointTs uint64 `json:"checkpoint_ts"`
	TargetTs     uint64 `json:"target_ts"`
	LagMs        int64  `json:"lag_ms"`
}

func bindFlush(fs *flag.FlagSet) func([]string) (action, error) {
	wait := fs.Bool("wait", false, "wait until the flush is complete (GetFlushState), printing progress")
	waitTimeout := fs.Duration("wait-timeout", 5*time.Minute, "with --wait, give up after `DURATION` (each poll is one request, bounded by --timeout)")
	interval := fs.Duration("interval", 200*time.Millisecond, "with --wait, poll every `DURATION`")
	return func(args []string) (action, error) {
		coll, err := oneArg(args, "COLLECTION_ID", parseCollectionID)
		if err != nil {
			return action{}, err
		}
		if *waitTimeout <= 0 || *interval <= 0 {
			return action{}, fmt.Errorf("--wait-timeout and --interval must be positive")
		}
		w, wt, iv := *wait, *waitTimeout, *interval
		return action{what: "flush", mutates: true, run: func(ctx context.Context, e *env) error {
			f, err := e.c.Flush(ctx, coll)
			if err != nil {
				return err
			}
			out := flushJSON{CollectionID: coll, FlushTs: f.FlushTs, SealTimeUnixMs: f.SealTimeUnixMs,
				SealedSegmentIDs: append([]int64{}, f.SealedSegmentIds...), FlushedSegmentIDs: append([]int64{}, f.FlushedSegmentIds...),
				Checkpoints: []channelCheckpointJSON{}, Behind: []flushLagJSON{}}
			for _, cp := range f.ChannelCheckpoints {
				out.Checkpoints = append(out.Checkpoints, toChannelCheckpointJSON(cp))
			}
			if !e.json {
				fmt.Fprintf(e.out, "Flush of collection %d: flush_ts %d, %d segment(s) sealed, %d already flushed.\n",
					coll, f.FlushTs, len(f.SealedSegmentIds), len(f.FlushedSegmentIds))
			}
			if !w {
				return e.show(out, sentence("Follow it with: coordctl flush %d --wait (or GetFlushState with flush_ts %d).\n", coll, f.FlushTs))
			}
			progressTo := e.out
			if e.json {
				progressTo = e.errOut
			}
			wctx, cancel := context.WithTimeout(ctx, wt)
			defer cancel()
			last, lastChange, lastWhy := "", time.Now(), ""
			st, err := e.c.WaitFlushed(wctx, f, iv, func(st *coordpb.GetFlushStateResponse) {
				if line := progressLine(st); line != last {
					fmt.Fprintln(progressTo, line)
					last, lastChange = line, time.Now()
					return
				}
				// No progress for 2 s: say what the slowest VChannel's
				// owner is up to (unreachable, moving), once per change.
				if v := slowestVChannel(st); v != "" && time.Since(lastChange) >= 2*time.Second {
					lastChange = time.Now()
					why, err := e.c.OwnerTrouble(wctx, vocab.PChannelOf(v))
					if err == nil && why != "" && why != lastWhy {
						fmt.Fprintf(progressTo, "  waiting on vchannel %s: %s\n", v, why)
						lastWhy = why
					}
				}
			})
			if err != nil {
				if st != nil {
					return fmt.Errorf("%w; last state: %s", err, progressLine(st))
				}
				return err
			}
			out.Waited, out.Flushed = true, st.Flushed
			out.SegmentsTotal, out.SegmentsFlushed = st.SegmentsTotal, st.SegmentsFlushed
			out.VChannelsTotal, out.VChannelsFlushed = st.VchannelsTotal, st.VchannelsFlushed
			for _, b := range st.Behind {
				out.Behind = append(out.Behind, flushLagJSON{Kind: b.Kind, SegmentID: b.SegmentId, VChannel: b.Vchannel, State: b.State,
					CheckpointTs: b.CheckpointTs, TargetTs: b.TargetTs, LagMs: b.LagMs})
			}
			return e.show(out, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "Flushed: %d/%d segments, %d/%d vchannels at or past flush_ts %d.\n",
					st.SegmentsFlushed, st.SegmentsTotal, st.VchannelsFlushed, st.VchannelsTotal, f.FlushTs)
				return err
			})
		}}, nil
	}
}

// slowestVChannel is the VChannel progressLine names ("" if none).
func slowestVChannel(st *coordpb.GetFlushStateResponse) string {
	var slowest *coordpb.FlushLag
	for _, b := range st.Behind {
		if b.Kind == "vchannel" && (slowest == nil || b.State == "none" || (slowest.State != "none" && b.LagMs > slowest.LagMs)) {
			slowest = b
		}
	}
	if slowest == nil {
		for _, b := range st.Behind {
			if b.Kind == "segment" {
				return b.Vchannel
			}
		}
		return ""
	}
	return slowest.Vchannel
}

// progressLine is one line of flush progress: segments flushed of total,
// and the slowest VChannel (or segment) with its lag.
func progressLine(st *coordpb.GetFlushStateResponse) string {
	line := fmt.Sprintf("segments flushed %d/%d, vchannels caught up %d/%d", st.SegmentsFlushed, st.SegmentsTotal,
		st.VchannelsFlushed, st.VchannelsTotal)
	var slowest *coordpb.FlushLag
	for _, b := range st.Behind {
		if b.Kind == "vchannel" && (slowest == nil || b.LagMs > slowest.LagMs) {
			slowest = b
		}
	}
	for _, b := range st.Behind {
		if b.Kind == "vchannel" && b.State == "none" {
			slowest = b // no checkpoint at all is the furthest behind
			break
		}
	}
	switch {
	case slowest != nil && slowest.State == "none":
		line += fmt.Sprintf(", slowest vchannel %s has no checkpoint yet", slowest.Vchannel)
	case slowest != nil:
		line += fmt.Sprintf(", slowest vchannel %s (%s) lag %dms", slowest.Vchannel, slowest.State, slowest.LagMs)
	}
	for _, b := range st.Behind {
		if b.Kind == "segment" {
			line += fmt.Sprintf(", segment %d %s", b.SegmentId, b.State)
			break
		}
	}
	if st.Flushed {
		line += ": flushed"
	}
	return line
}

type recoveryJSON struct {
	CollectionID    int64         `json:"collection_id"`
	VChannel        string        `json:"vchannel"`
	SeekPosition    *positionJSON `json:"seek_position"`
	Dropped         bool          `json:"dropped"`
	Unflushed       []segRefJSON  `json:"unflushed"`
	Flushed         []segRefJSON  `json:"flushed"`
	DroppedSegments []segRefJSON  `json:"dropped_segments"`
	LevelZero       []segRefJSON  `json:"level_zero"`
}

type segRefJSON struct {
	SegmentID     int64         `json:"segment_id"`
	PartitionID   int64         `json:"partition_id"`
	State         string        `json:"state"`
	Level         string        `json:"level"`
	RowCount      int64         `json:"row_count"`
	StartPosition *positionJSON `json:"start_position"`
	DMLPosition   *positionJSON `json:"dml_position"`
}

func toSegRefs(refs []*coordpb.SegmentRef) []segRefJSON {
	out := []segRefJSON{}
	for _, r := range refs {
		out = append(out, segRefJSON{SegmentID: r.SegmentId, PartitionID: r.PartitionId, State: r.State, Level: r.Level,
			RowCount: r.NumOfRows, StartPosition: toPositionJSON(r.StartPosition), DMLPosition: toPositionJSON(r.DmlPosition)})
	}
	return out
}

func bindRecoveryInfo(fs *flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "VCHANNEL"); err != nil {
			return action{}, err
		}
		v := args[0]
		if err := checkVChannel(v); err != nil {
			return action{}, err
		}
		return action{what: "recovery-info", run: func(ctx context.Context, e *env) error {
			info, err := e.c.GetRecoveryInfo(ctx, v)
			if err != nil {
				return err
			}
			out := recoveryJSON{CollectionID: info.CollectionId, VChannel: info.Vchannel, SeekPosition: toPositionJSON(info.SeekPosition),
				Dropped: info.Dropped, Unflushed: toSegRefs(info.Unflushed), Flushed: toSegRefs(info.Flushed),
				DroppedSegments: toSegRefs(info.DroppedSegments), LevelZero: toSegRefs(info.LevelZero)}
			return e.show(out, func(w io.Writer) error {
				fmt.Fprintf(w, "VChannel %s (collection %d), seek position %s, dropped %v\n", out.VChannel, out.CollectionID,
					positionString(info.SeekPosition), out.Dropped)
				tw := newTable(w)
				fmt.Fprintln(tw, "GROUP\tSEGMENT\tPARTITION\tSTATE\tLEVEL\tROWS\tSTART\tDML")
				for _, g := range []struct {
					name string
					refs []*coordpb.SegmentRef
				}{{"unflushed", info.Unflushed}, {"flushed", info.Flushed}, {"dropped", info.DroppedSegments}, {"l0", info.LevelZero}} {
					for _, r := range g.refs {
						fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\t%s\n", g.name, r.SegmentId, r.PartitionId, r.State, r.Level, r.NumOfRows,
							positionString(r.StartPosition), positionString(r.DmlPosition))
					}
				}
				return tw.Flush()
			})
		}}, nil
	}
}
