package fsm

import (
	"fmt"
	"math"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Bounds on what a VChannel's owner reports (docs/semantics.md#position-bounds).
//
// A WAL position names a record that exists: its term is a PChannel term
// some owner held, so at most the PChannel's current term, and its time
// tick is a timestamp of coordd's TSO, which never hands out one at or
// above the committed window limit (allocState.tsoLimitPhysicalMs, raised
// by ExtendTSOWindow before any timestamp of the new window is used, so
// a report always commits after the limit that covers it). Apply refuses
// anything beyond, so a position far in the future cannot pin a
// checkpoint or make a recovery skip rows.

// PositionSlackMs is how far past the committed TSO limit a reported time
// tick may be. A correct owner never comes near the limit; the slack (one
// default TSO window) covers a limit that went back without the oracle's
// timestamps going back: a quorum-loss recovery or a restore from a member
// or backup that had not applied the newest ExtendTSOWindow. The next
// leader's first window covers such timestamps again.
const PositionSlackMs = 3000

// MaxPositionTs is the exclusive upper bound of a reported time tick: the
// first timestamp of the millisecond PositionSlackMs after the committed
// TSO limit.
func (s *State) MaxPositionTs() uint64 {
	return ComposeTS(s.alloc.tsoLimitPhysicalMs + PositionSlackMs)
}

// checkTimestamp: ts is a timestamp the TSO can have handed out.
func (s *State) checkTimestamp(what string, ts uint64) error {
	if ts == commands.DroppedTimestamp {
		return fmt.Errorf("%s: time tick %d is the dropped sentinel", what, ts)
	}
	if ts >= s.MaxPositionTs() {
		return fmt.Errorf("%s: time tick %d (physical %d ms) is beyond the committed TSO limit %d ms plus %d ms",
			what, ts, PhysicalMs(ts), s.alloc.tsoLimitPhysicalMs, PositionSlackMs)
	}
	return nil
}

// checkPosition: p's term is at most the current term of vchannel's
// PChannel and its time tick is within the TSO bound.
func (s *State) checkPosition(what, vchannel string, p Position) error {
	pname := vocab.PChannelOf(vchannel)
	pc, ok := s.ch.pchannels.Get(pname)
	if !ok {
		return fmt.Errorf("%s: pchannel %s does not exist", what, pname)
	}
	if p.Term > pc.Term {
		return fmt.Errorf("%s: message term %d is beyond pchannel %s's current term %d", what, p.Term, pname, pc.Term)
	}
	return s.checkTimestamp(what, p.Timestamp)
}

// CheckTimeTick is the bound of a reported time tick (not logged: the
// leader checks ReportTimeTicks against its applied state with it).
func (s *State) CheckTimeTick(vchannel string, tick uint64) error {
	return s.checkTimestamp("time tick of "+vchannel, tick)
}

// movesBack says why next, which orders after prev by time tick, is still
// not a later WAL position ("" when it is): within one term offsets only
// grow with time ticks. Across terms there is no offset order to check
// (an idle owner's checkpoint names its own term while the records it
// replays may be of an older one).
func movesBack(prev, next Position) string {
	if prev.IsZero() || prev.Term != next.Term || next.Offset >= prev.Offset {
		return ""
	}
	return fmt.Sprintf("offset %d is before the stored offset %d in term %d", next.Offset, prev.Offset, next.Term)
}

// checkSavePositions bounds every position and time tick a save reports.
// It returns a rejection (nothing is written) or nil.
func checkSavePositions(next *State, b *logpb.SaveBinlogPaths) *logpb.Result {
	bad := func(err error) *logpb.Result {
		return reject(logpb.RejectCode_REJECT_INVALID, "save binlogs of segment %d: %v", b.SegmentId, err)
	}
	for _, cp := range b.Checkpoints {
		if err := next.checkPosition(fmt.Sprintf("checkpoint of segment %d", cp.SegmentId), b.Vchannel, positionOf(cp.Position)); err != nil {
			return bad(err)
		}
	}
	for _, sp := range b.StartPositions {
		if err := next.checkPosition(fmt.Sprintf("start position of segment %d", sp.SegmentId), b.Vchannel, positionOf(sp.Position)); err != nil {
			return bad(err)
		}
	}
	for _, list := range [][]*logpb.FieldLogs{b.Binlogs, b.Statslogs} {
		for _, f := range list {
			if err := checkLogTimes(next, f.Logs); err != nil {
				return bad(err)
			}
		}
	}
	if err := checkLogTimes(next, b.Deltalogs); err != nil {
		return bad(err)
	}
	return nil
}

func checkLogTimes(s *State, logs []*logpb.LogRef) error {
	for _, l := range logs {
		if err := s.checkTimestamp(fmt.Sprintf("log %d", l.LogId), l.TimestampTo); err != nil {
			return err
		}
	}
	return nil
}

// addCount adds two non-negative counts; ok=false when the sum does not
// fit an int64 (a row count or size that would wrap negative).
func addCount(a, b int64) (int64, bool) {
	if b > math.MaxInt64-a {
		return 0, false
	}
	return a + b, true
}
