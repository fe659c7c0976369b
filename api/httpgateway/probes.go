package httpgateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/coordd/coordd/raftnode"
)

// Probes answers liveness and readiness checks.
type Probes struct {
	Node *raftnode.Node
	// MaxLag is how many entries the member may trail the cluster's commit
	// index and still be ready (coordd --ready-max-lag); 0 means
	// raftnode.DefaultReadyMaxLag.
	MaxLag uint64
}

// healthz: the process is up and serving HTTP.
func (p Probes) healthz(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, map[string]any{"status": "ok"})
}

// readyz answers 200 when raftnode.Node.Readiness says the member is ready
// (its term and vote, log and snapshot writes succeed — a full disk is
// named, with disk_full — a leader is known, and it is within MaxLag entries of
// the highest commit index a leader told it about) and, on a follower, the
// leader's gRPC address is registered in the replicated member table, and
// 503 with the reason otherwise. Without that address a follower cannot
// forward a single write, so sending it traffic would only return
// Unavailable; it is the normal state for the first moments of a new
// cluster, until the leader's registration commits.
func (p Probes) readyz(w http.ResponseWriter, _ *http.Request) {
	maxLag := p.MaxLag
	if maxLag == 0 {
		maxLag = raftnode.DefaultReadyMaxLag
	}
	r := p.Node.Readiness(maxLag)
	if r.Ready && r.LeaderID != p.Node.ID() {
		if m, ok := p.Node.State().Member(r.LeaderID); !ok || m.GrpcAddr == "" {
			r.Ready = false
			r.Status = fmt.Sprintf("leader %s has not registered its gRPC address yet: calls cannot be forwarded to it", r.LeaderID)
		}
	}
	body := map[string]any{"status": r.Status, "leader_id": r.LeaderID, "commit_index": r.CommitIndex,
		"applied_index": r.AppliedIndex, "leader_commit_index": r.LeaderCommitIndex, "max_lag": maxLag}
	if !r.FailingSince.IsZero() {
		body["failing_since"] = r.FailingSince.UTC().Format(time.RFC3339Nano)
		body["disk_full"] = r.DiskFull
	}
	code := http.StatusOK
	if !r.Ready {
		code = http.StatusServiceUnavailable
	}
	writeProbe(w, code, body)
}

func writeProbe(w http.ResponseWriter, code int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
