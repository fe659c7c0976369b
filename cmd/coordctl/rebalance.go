package main

import (
	"fmt"
	"io"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// rebalanceJSON is `pchannel rebalance -o json`.
type rebalanceJSON struct {
	Moves          []rebalanceMoveJSON `json:"moves"`
	Reason         string              `json:"reason,omitempty"`
	NextMoveUnixMs int64               `json:"next_move_unix_ms,omitempty"`
	RoundDone      bool                `json:"round_done"`
}

type rebalanceMoveJSON struct {
	PChannel string `json:"pchannel"`
	From     uint64 `json:"from_node_id"`
	To       uint64 `json:"to_node_id"`
	Term     int64  `json:"term"`
}

func rebalanceJSONOf(r *coordpb.RebalanceResponse) rebalanceJSON {
	out := rebalanceJSON{Moves: []rebalanceMoveJSON{}, Reason: r.GetReason(), NextMoveUnixMs: r.GetNextMoveUnixMs(), RoundDone: r.GetRoundDone()}
	for _, m := range r.GetMoves() {
		out.Moves = append(out.Moves, rebalanceMoveJSON{m.GetPchannel(), m.GetFromNodeId(), m.GetToNodeId(), m.GetTerm()})
	}
	return out
}

// printRebalance says what the round moved, or why nothing moved and when
// it next can.
func printRebalance(w io.Writer, r *coordpb.RebalanceResponse, now time.Time) error {
	if len(r.GetMoves()) > 0 {
		fmt.Fprintf(w, "Moved %d pchannel(s):\n", len(r.GetMoves()))
		tw := newTable(w)
		fmt.Fprintln(tw, "PCHANNEL\tFROM\tTO\tTERM")
		for _, m := range r.GetMoves() {
			from := "-"
			if m.GetFromNodeId() != 0 {
				from = fmt.Sprint(m.GetFromNodeId())
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", m.GetPchannel(), from, m.GetToNodeId(), m.GetTerm())
		}
		return tw.Flush()
	}
	if !r.GetRoundDone() {
		_, err := fmt.Fprintf(w, "Rebalance requested: %s.\n", dashIfEmpty(r.GetReason()))
		return err
	}
	msg := "Nothing moved: " + dashIfEmpty(r.GetReason()) + "."
	if ms := r.GetNextMoveUnixMs(); ms > 0 {
		at := time.UnixMilli(ms)
		msg += fmt.Sprintf(" Next move possible at %s (in %s).", at.Format("15:04:05"), max(at.Sub(now), 0).Round(time.Second))
	}
	_, err := fmt.Fprintln(w, msg)
	return err
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
