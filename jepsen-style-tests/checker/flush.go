package checker

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// History functions of the flush workload.
const (
	FInsert      = "insert"
	FFlush       = "flush"
	FCheckpoints = "checkpoints"
	FFinalRead   = "final-read"
)

// InsertOut is an acknowledged insert: primary keys First..Last.
type InsertOut struct {
	First int64 `json:"first"`
	Last  int64 `json:"last"`
}

// FlushOut is a Flush and what GetFlushState said about it; Checkpoints
// are the collection's VChannel checkpoints read right after GetFlushState
// answered flushed.
type FlushOut struct {
	FlushTs     uint64            `json:"flush_ts"`
	Flushed     bool              `json:"flushed"`
	Checkpoints map[string]uint64 `json:"checkpoints,omitempty"`
}

// FinalRead is every persisted row at the end of the run: primary key ->
// how many Flushed segments' binlogs hold it.
type FinalRead struct {
	Counts   map[int64]int `json:"counts"`
	Segments int           `json:"segments"`
}

// FlushExactlyOnce: in the final read, every row of an acknowledged insert
// is persisted exactly once and no row is persisted more than once (rows
// of inserts with unknown outcome may be missing).
func FlushExactlyOnce(ops []history.Op) Result {
	r := Result{Checker: "flush-exactly-once", Verdict: Valid}
	var final *FinalRead
	acked, rows := 0, 0
	for _, op := range ops {
		if op.Type != history.Ok {
			continue
		}
		if op.F == FFinalRead {
			var fr FinalRead
			if err := json.Unmarshal(op.Output, &fr); err != nil {
				r.violation("final read: %v", err)
				continue
			}
			final = &fr
		}
	}
	if final == nil {
		r.Verdict, r.Summary = Unknown, "no final read (the final flush did not complete)"
		return r
	}
	for pk, n := range final.Counts {
		if n > 1 {
			r.violation("pk %d is in %d Flushed segments' binlogs", pk, n)
		}
	}
	for _, op := range ops {
		if op.Type != history.Ok || op.F != FInsert {
			continue
		}
		var in InsertOut
		if err := json.Unmarshal(op.Output, &in); err != nil {
			r.violation("insert op %d: %v", op.Index, err)
			continue
		}
		acked++
		for pk := in.First; pk <= in.Last; pk++ {
			rows++
			if final.Counts[pk] == 0 {
				r.violation("pk %d of acknowledged insert op %d is not persisted", pk, op.Index)
			}
		}
	}
	if r.Verdict == Valid {
		r.Summary = fmt.Sprintf("%d acknowledged inserts, %d rows, each persisted once; %d rows persisted in %d segments",
			acked, rows, len(final.Counts), final.Segments)
	} else {
		r.Summary = fmt.Sprintf("%d violations", r.Violations)
	}
	return r
}

// FlushStateVsCheckpoints: whenever GetFlushState said flushed, every
// VChannel checkpoint read right after was at or past flush_ts
// (checkpoints only move forward, so one below it means it was below when
// GetFlushState answered too).
func FlushStateVsCheckpoints(ops []history.Op) Result {
	r := Result{Checker: "flush-state-vs-checkpoints", Verdict: Valid}
	n := 0
	for _, op := range ops {
		if op.Type != history.Ok || op.F != FFlush {
			continue
		}
		var out FlushOut
		if err := json.Unmarshal(op.Output, &out); err != nil {
			r.violation("flush op %d: %v", op.Index, err)
			continue
		}
		if !out.Flushed || out.Checkpoints == nil {
			continue
		}
		n++
		if len(out.Checkpoints) == 0 {
			r.violation("flush op %d: flushed at flush_ts %d but the collection has no checkpoints", op.Index, out.FlushTs)
		}
		for v, ts := range out.Checkpoints {
			if ts < out.FlushTs {
				r.violation("flush op %d: flushed at flush_ts %d while %s's checkpoint is %d", op.Index, out.FlushTs, v, ts)
			}
		}
	}
	r.Summary = fmt.Sprintf("%d completed flushes checked", n)
	return r
}

// CheckpointsMonotonic: a checkpoint read that starts after another read
// completed never sees an older time tick for a VChannel.
func CheckpointsMonotonic(ops []history.Op) Result {
	r := Result{Checker: "checkpoints-monotonic", Verdict: Valid}
	type read struct {
		invoke, complete int64
		cps              map[string]uint64
		index            int
	}
	var reads []read
	for _, op := range ops {
		if op.Type != history.Ok {
			continue
		}
		var cps map[string]uint64
		switch op.F {
		case FCheckpoints:
			if err := json.Unmarshal(op.Output, &cps); err != nil {
				r.violation("checkpoint op %d: %v", op.Index, err)
				continue
			}
		case FFlush:
			var out FlushOut
			if json.Unmarshal(op.Output, &out) != nil || out.Checkpoints == nil {
				continue
			}
			cps = out.Checkpoints
		default:
			continue
		}
		reads = append(reads, read{op.Invoke, op.Complete, cps, op.Index})
	}
	byComplete := append([]read(nil), reads...)
	sort.Slice(byComplete, func(i, j int) bool { return byComplete[i].complete < byComplete[j].complete })
	sort.Slice(reads, func(i, j int) bool { return reads[i].invoke < reads[j].invoke })
	seen := map[string]uint64{} // highest tick among reads completed so far
	from := map[string]int{}
	k := 0
	for _, b := range reads {
		for ; k < len(byComplete) && byComplete[k].complete < b.invoke; k++ {
			for v, ts := range byComplete[k].cps {
				if ts > seen[v] {
					seen[v], from[v] = ts, byComplete[k].index
				}
			}
		}
		for v, ts := range b.cps {
			if ts < seen[v] {
				r.violation("%s: op %d read checkpoint %d after op %d had read %d", v, b.index, ts, from[v], seen[v])
			}
		}
	}
	r.Summary = fmt.Sprintf("%d checkpoint reads", len(reads))
	return r
}
