package datapath

import (
	"context"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// The flusher-facing writes. Allocations and time ticks are answered from
// the leader's memory (controller/flush); saves and checkpoints are
// commands whose owner check runs inside Apply.

// AssignSegmentID places rows in growing segments of the caller's
// VChannels (flush.Manager.AssignSegmentID).
func (s *Service) AssignSegmentID(ctx context.Context, a Assign) ([]flush.Assignment, error) {
	return s.flush.AssignSegmentID(ctx, a.Node, a.reqs, commands.CallerNode(a.Caller))
}

// TicksResult answers a time-tick report.
type TicksResult struct {
	Accepted int
	Refused  []string
	// CheckpointWanted: VChannels of the report a flush waiter needs a
	// fresh checkpoint of (wants.go).
	CheckpointWanted []string
	// TickWanted: VChannels of the report with a sealed segment whose seal
	// time the reported tick has not passed.
	TickWanted []string
}

// ReportTimeTicks records the ticks of their VChannels' owners and says
// which VChannels the flush path waits on.
func (s *Service) ReportTimeTicks(ctx context.Context, t Ticks) (TicksResult, error) {
	acc, refused, err := s.flush.ReportTimeTicks(t.Node, t.ticks)
	if err != nil {
		return TicksResult{}, err
	}
	vs := make([]string, len(t.ticks))
	for i, tk := range t.ticks {
		vs[i] = tk.VChannel
	}
	return TicksResult{Accepted: acc, Refused: refused, CheckpointWanted: s.wants.wanted(vs, s.clock.Now()),
		TickWanted: ticksWanted(s.l.State(), t.ticks)}, nil
}

// ticksWanted lists the VChannels of ticks with a sealed segment whose
// seal time the reported tick has not passed: the flush of that segment
// waits for a fresh tick from its owner. Without a sealed segment
// anywhere (the FSM counts them) nothing is wanted, and the report's
// VChannels are not walked: streaming nodes report every VChannel's tick
// continuously, sealed segments are few and short-lived.
func ticksWanted(st *fsm.State, ticks []flush.TimeTick) []string {
	if st.SegmentCountIn(logpb.SegmentState_SEGMENT_SEALED) == 0 {
		return nil
	}
	var out []string
	for _, t := range ticks {
		for _, g := range st.SegmentsOfVChannel(t.VChannel) {
			if g.State == logpb.SegmentState_SEGMENT_SEALED && g.SealTs > t.Tick {
				out = append(out, t.VChannel)
				break
			}
		}
	}
	return out
}

// SaveResult answers a binlog save.
type SaveResult struct {
	Stale bool
	State logpb.SegmentState
}

// SaveBinlogPaths records one segment's binlogs, positions and state. A
// named manifest revision is checked in the object store first; a save
// that makes the segment Flushed is observed by the flush manager (seal
// to Flushed time, read from the state just before the save).
func (s *Service) SaveBinlogPaths(ctx context.Context, sv Save) (SaveResult, error) {
	if err := s.revisions.CheckNamedRevision(ctx, s.l.State(), sv.segment, sv.manifestPath); err != nil {
		return SaveResult{}, err
	}
	var sealedMs int64
	if g, ok := s.l.State().Segment(sv.segment); ok {
		sealedMs = g.SealedMs
	}
	res, err := commands.Commit(ctx, s.l, sv.cmd, commands.CallerNode(sv.Caller))
	if err != nil {
		return SaveResult{}, err
	}
	r := res.GetSaveBinlogs()
	if !r.Stale && r.State == logpb.SegmentState_SEGMENT_FLUSHED {
		s.flush.ObserveFlushed(sealedMs)
	}
	return SaveResult{Stale: r.Stale, State: r.State}, nil
}

// CheckpointsResult answers a checkpoint batch: refused entries are
// listed, not errors.
type CheckpointsResult struct {
	Accepted uint32
	Refused  []string
}

// UpdateChannelCheckpoints advances a batch of VChannel checkpoints in one
// command. A checkpoint not newer than the stored one (checkpoints only
// grow) or of a dropped VChannel is refused here, without a log entry:
// an idle flusher re-reports the same checkpoint, and a batch of only
// such entries costs no raft round. Apply checks everything again for the
// rest (the same two rules and the owner, position and liveness checks).
func (s *Service) UpdateChannelCheckpoints(ctx context.Context, cp Checkpoints) (CheckpointsResult, error) {
	b := cp.cmd.Body.(*logpb.UpdateChannelCheckpoints)
	keep, refused := prefilterCheckpoints(s.l.State(), b.Checkpoints)
	if len(keep) == 0 {
		return CheckpointsResult{Refused: refused}, nil
	}
	c := cp.cmd
	if len(keep) < len(b.Checkpoints) {
		var err error
		if c, err = commands.New(&logpb.UpdateChannelCheckpoints{NodeId: b.NodeId, Checkpoints: keep}, ""); err != nil {
			return CheckpointsResult{}, vocab.Errorf(ErrInvalid, "%w", err)
		}
	}
	res, err := commands.Commit(ctx, s.l, c, commands.CallerNode(cp.Caller))
	if err != nil {
		return CheckpointsResult{}, err
	}
	r := res.GetCheckpoints()
	return CheckpointsResult{Accepted: r.GetAccepted(), Refused: append(refused, r.GetRefused()...)}, nil
}

// prefilterCheckpoints splits us into those worth proposing and the
// descriptions of those Apply would refuse anyway (the stored checkpoint
// is dropped, or not older).
func prefilterCheckpoints(st *fsm.State, us []*logpb.ChannelCheckpointUpdate) (keep []*logpb.ChannelCheckpointUpdate, refused []string) {
	keep = us[:0:0]
	for _, u := range us {
		if old, ok := st.ChannelCheckpoint(u.Vchannel); ok {
			if old.Dropped() {
				refused = append(refused, u.Vchannel+": vchannel is dropped")
				continue
			}
			if !old.Position.Less(fsm.Position{Term: u.Position.Term, Offset: u.Position.Offset, Timestamp: u.Position.Timestamp}) {
				refused = append(refused, u.Vchannel+": not newer than the stored checkpoint")
				continue
			}
		}
		keep = append(keep, u)
	}
	return keep, refused
}
