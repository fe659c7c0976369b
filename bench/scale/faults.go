package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// killResult is one SIGKILL of the leader: time to the first committed
// write through a surviving member, time to the first assignment push of
// the new leader's term, time until the killed member, restarted from its
// data dir, serves again, and the elections the whole episode took.
type killResult struct {
	Write, Push, Restart time.Duration
	RestartPhases        []string // /readyz's statuses on the way back (waitReadyTraced)
	Elections            uint64
	Err                  string
}

// committedWrite retries a one-VChannel checkpoint through every running
// member in turn (1 s per try) until one commits.
func (e *env) committedWrite(ctx context.Context, limit time.Duration) error {
	vch := e.probeVChannel()
	deadline := time.Now().Add(limit)
	var last error
	for i := 0; time.Now().Before(deadline); i++ {
		o, ok := e.ownerOf(vch)
		cs := e.conns()
		if ok {
			t := nextPosition()
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := coordpb.NewDataCoordClient(cs[i%len(cs)]).UpdateChannelCheckpoints(cctx, &coordpb.UpdateChannelCheckpointsRequest{NodeId: o.node,
				Checkpoints: []*coordpb.ChannelCheckpoint{{Vchannel: vch, PchannelTerm: o.term, Position: &coordpb.Position{Term: o.term, Offset: t >> 10, Timestamp: t}}}})
			cancel()
			if err == nil && len(resp.Refused) == 0 {
				return nil
			}
			if err == nil {
				err = fmt.Errorf("refused: %s", resp.Refused[0])
			}
			last = err
			_ = e.readOwners(ctx, false)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no committed write within %v: %v", limit, last)
}

func (e *env) killLeader(ctx context.Context, restartLimit time.Duration) killResult {
	var r killResult
	lead, st, err := e.leader(ctx, 2*time.Minute)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	g0 := st.EstablishedTerm
	term0 := e.maxTerm(ctx)
	t0 := time.Now()
	lead.kill(false)
	if err := e.committedWrite(ctx, 2*time.Minute); err != nil {
		r.Err = err.Error()
	}
	r.Write = time.Since(t0)
	for time.Since(t0) < time.Minute && e.sn.firstPushAfter(g0).IsZero() {
		time.Sleep(20 * time.Millisecond)
	}
	if p := e.sn.firstPushAfter(g0); !p.IsZero() {
		r.Push = p.Sub(t0)
	}
	if _, _, err := e.leader(ctx, time.Minute); err != nil && r.Err == "" {
		r.Err = err.Error()
	}
	t1 := time.Now()
	if err := lead.start("", e.objects); err != nil {
		r.Err = err.Error()
		return r
	}
	_, phases, err := lead.waitReadyTraced(ctx, restartLimit)
	if err != nil && r.Err == "" {
		r.Err = err.Error()
	}
	r.Restart, r.RestartPhases = time.Since(t1), phases
	r.Elections = e.maxTerm(ctx) - term0
	return r
}

// replaceResult: a follower replaced by a new member with an empty data
// dir that joins and catches up through InstallSnapshot.
type replaceResult struct {
	Old, New  string
	CatchUp   time.Duration
	Elections uint64
	Err       string
}

func (e *env) replaceFollower(ctx context.Context, newID string, limit time.Duration) replaceResult {
	lead, _, err := e.leader(ctx, 2*time.Minute)
	if err != nil {
		return replaceResult{Err: err.Error()}
	}
	idx := -1
	e.mu.Lock()
	for i, m := range e.members {
		if m != lead && m.running() {
			idx = i
		}
	}
	old := e.members[max(idx, 0)]
	e.mu.Unlock()
	r := replaceResult{Old: old.id, New: newID}
	if idx < 0 {
		r.Err = "no running follower"
		return r
	}
	term0 := e.maxTerm(ctx)
	old.kill(false)
	err = retryUnavailable(ctx, func(ctx context.Context) error {
		_, err := coordpb.NewClusterClient(e.leaderConn()).RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: old.id})
		return err
	})
	if err != nil {
		r.Err = fmt.Sprintf("remove %s: %v", old.id, err)
		return r
	}
	if err := os.RemoveAll(old.dir); err != nil {
		r.Err = err.Error()
		return r
	}
	nm, err := newMember(old.binary, dirOf(old), newID, old.extra)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	e.mu.Lock()
	e.members[idx] = nm
	e.mu.Unlock()
	lead, _, err = e.leader(ctx, 2*time.Minute)
	if err != nil {
		r.Err = err.Error()
		return r
	}
	t0 := time.Now()
	if err := nm.start(lead.grpcAddr, e.objects); err != nil {
		r.Err = err.Error()
		return r
	}
	if _, err := nm.waitReady(ctx, limit); err != nil {
		r.Err = err.Error()
	}
	r.CatchUp = time.Since(t0)
	r.Elections = e.maxTerm(ctx) - term0
	return r
}
