package httpgateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/raftnode"
)

// RaftDelayer is a member's raft fault-injection hook (raftnode.Node with
// Config.FaultInjection).
type RaftDelayer interface {
	SetRaftDelay(kind string, d time.Duration) error
	RaftDelays() map[string]time.Duration
}

// raftDelayRequest is POST /debug/raft-delay's body.
type raftDelayRequest struct {
	Kind    string `json:"kind"`
	DelayMs int64  `json:"delay_ms"`
}

// raftDelayAnswer lists the delays in force, in milliseconds by kind.
type raftDelayAnswer struct {
	DelaysMs map[string]int64 `json:"delays_ms"`
}

// serveRaftDelay shows (GET) or sets (POST) the raft RPC delays of this
// member. Test only: served with --fault-injection, admin role.
func (g *Gateway) serveRaftDelay(w http.ResponseWriter, r *http.Request) {
	if g.delays == nil {
		writeError(w, status.Error(codes.NotFound, "fault injection is off on this member"), "", "")
		return
	}
	if r.Method == http.MethodPost {
		var req raftDelayRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			writeError(w, status.Error(codes.InvalidArgument, fmt.Sprintf("raft delay: decode body: %v", err)), "", "")
			return
		}
		if req.DelayMs < 0 || req.DelayMs > int64(time.Hour/time.Millisecond) {
			writeError(w, status.Error(codes.InvalidArgument, fmt.Sprintf("raft delay: delay_ms %d out of range", req.DelayMs)), "", "")
			return
		}
		if err := g.delays.SetRaftDelay(req.Kind, time.Duration(req.DelayMs)*time.Millisecond); err != nil {
			writeError(w, status.Error(codes.InvalidArgument, "raft delay: "+err.Error()), "", "")
			return
		}
	}
	ans := raftDelayAnswer{DelaysMs: map[string]int64{}}
	for k, d := range g.delays.RaftDelays() {
		ans.DelaysMs[k] = d.Milliseconds()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(ans)
}

// SnapshotReplayer is a member's stale-snapshot fault-injection hook
// (raftnode.Node with Config.FaultInjection): it delivers the last
// InstallSnapshot it received to itself again.
type SnapshotReplayer interface {
	ReplaySnapshot(timeout time.Duration) (raftnode.SnapshotReplay, error)
}

// serveReplaySnapshot replays the last snapshot this member received and
// answers what raft did with it. Test only: served with --fault-injection,
// admin role.
func (g *Gateway) serveReplaySnapshot(w http.ResponseWriter, r *http.Request) {
	rp, ok := g.delays.(SnapshotReplayer)
	if !ok {
		writeError(w, status.Error(codes.NotFound, "fault injection is off on this member"), "", "")
		return
	}
	got, err := rp.ReplaySnapshot(g.timeout)
	switch {
	case errors.Is(err, raftnode.ErrNoSnapshotReceived):
		writeError(w, status.Error(codes.FailedPrecondition, "replay snapshot: "+err.Error()), "", "")
		return
	case err != nil:
		writeError(w, status.Error(codes.Unavailable, "replay snapshot: "+err.Error()), "", "")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(got)
}
