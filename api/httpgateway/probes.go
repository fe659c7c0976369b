package httpgateway

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/coordd/coordd/raftnode"
)

// Probes answers liveness and readiness checks.
type Probes struct {
	Node *raftnode.Node
}

// healthz: the process is up and serving HTTP.
func (p Probes) healthz(w http.ResponseWriter, _ *http.Request) {
	writeProbe(w, http.StatusOK, map[string]any{"status": "ok"})
}

// maxReadyLag is how far applied may trail commit on a ready node: under
// write load a follower is always a few entries behind for a moment, and a
// probe that flapped on that would be useless.
const maxReadyLag = 64

// readyz: a leader is known, this node's last append to its raft log did
// not fail, and it has applied (within maxReadyLag) everything it knows to
// be committed, so its stale reads are current and it can forward. A
// follower that cannot append (a full disk) learns no new commit index, so
// the append check is what tells it is falling behind.
func (p Probes) readyz(w http.ResponseWriter, _ *http.Request) {
	leader, _ := p.Node.Leader()
	r := p.Node.Raft()
	commit, applied := r.CommitIndex(), r.AppliedIndex()
	since, appendErr := p.Node.AppendError()
	body := map[string]any{"leader_id": leader, "commit_index": commit, "applied_index": applied}
	switch {
	case leader == "":
		body["status"] = "no leader known"
		writeProbe(w, http.StatusServiceUnavailable, body)
	case appendErr != nil:
		body["status"] = appendErr.Error()
		body["failing_since"] = since.UTC().Format(time.RFC3339Nano)
		writeProbe(w, http.StatusServiceUnavailable, body)
	case applied+maxReadyLag < commit:
		body["status"] = "catching up"
		writeProbe(w, http.StatusServiceUnavailable, body)
	default:
		body["status"] = "ready"
		writeProbe(w, http.StatusOK, body)
	}
}

func writeProbe(w http.ResponseWriter, code int, body map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
