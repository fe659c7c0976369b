package raftnode

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Fault injection (Config.FaultInjection): a member keeps a copy of the
// last InstallSnapshot it received and can deliver it to itself again, as
// an overtaken replication stream or a retransmitting link delivers a
// snapshot late (stale_snapshot.go). The copy is re-stamped with the
// current term and leader, the only sender raft would accept it from. The
// Jepsen-style stale-snapshot nemesis uses it: the member must refuse a
// snapshot below its applied index, or one its log holds with more after
// it, and the checkers see anything a wrong install would do.

// maxReplayedSnapshot bounds the copy kept (larger snapshots are not kept).
const maxReplayedSnapshot = 32 << 20

// ErrNoSnapshotReceived: the member has received no snapshot to replay.
var ErrNoSnapshotReceived = errors.New("this member has received no InstallSnapshot since it started (or only one too large to keep)")

// receivedSnapshot is the copy of the last InstallSnapshot received.
type receivedSnapshot struct {
	mu   sync.Mutex
	req  raft.InstallSnapshotRequest
	data []byte
	ok   bool
}

// capture makes rpc's data be copied as raft reads it; the copy is kept
// once raft has read all of it.
func (s *receivedSnapshot) capture(rpc *raft.RPC) {
	req, ok := rpc.Command.(*raft.InstallSnapshotRequest)
	if !ok || rpc.Reader == nil || req.Size > maxReplayedSnapshot || req.Size < 0 {
		return
	}
	rpc.Reader = &capturingReader{r: rpc.Reader, s: s, req: *req, buf: make([]byte, 0, req.Size)}
}

type capturingReader struct {
	r   io.Reader
	s   *receivedSnapshot
	req raft.InstallSnapshotRequest
	buf []byte
}

func (c *capturingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.buf = append(c.buf, p[:n]...)
	if int64(len(c.buf)) == c.req.Size && c.buf != nil {
		c.s.mu.Lock()
		c.s.req, c.s.data, c.s.ok = c.req, c.buf, true
		c.s.mu.Unlock()
		c.buf = nil
	}
	return n, err
}

// SnapshotReplay is what a replayed snapshot got.
type SnapshotReplay struct {
	Index   uint64 `json:"index"`
	Term    uint64 `json:"term"`
	Applied uint64 `json:"applied_index"` // raft's applied index before the replay
	Last    uint64 `json:"last_index"`    // raft's last log index before the replay
	Refused bool   `json:"refused"`
	Answer  string `json:"answer"` // the refusal, or "installed"
}

// ReplaySnapshot delivers the last InstallSnapshot this member received to
// itself again, as from its current leader in the current term, and says
// what raft answered. Test only: it fails unless Config.FaultInjection is
// set.
func (n *Node) ReplaySnapshot(timeout time.Duration) (SnapshotReplay, error) {
	w := n.watch
	if w.faults == nil {
		return SnapshotReplay{}, ErrFaultInjectionOff
	}
	w.received.mu.Lock()
	req, data, ok := w.received.req, w.received.data, w.received.ok
	w.received.mu.Unlock()
	if !ok {
		return SnapshotReplay{}, ErrNoSnapshotReceived
	}
	addr, id := n.raft.LeaderWithID()
	if addr == "" || id == raft.ServerID(n.cfg.ID) {
		return SnapshotReplay{}, errors.New("replay a snapshot: this member follows no leader now")
	}
	req.Term = n.raft.CurrentTerm()
	req.RPCHeader.ID, req.RPCHeader.Addr, req.Leader = []byte(id), []byte(addr), []byte(addr)
	out := SnapshotReplay{Index: req.LastLogIndex, Term: req.LastLogTerm, Applied: n.raft.AppliedIndex(), Last: n.raft.LastIndex()}
	resp := make(chan raft.RPCResponse, 1)
	if !w.deliver(raft.RPC{Command: &req, Reader: bytes.NewReader(data), RespChan: resp}) {
		return out, errors.New("replay a snapshot: the member is shutting down")
	}
	select {
	case r := <-resp:
		ans, _ := r.Response.(*raft.InstallSnapshotResponse)
		switch {
		case r.Error != nil:
			out.Refused, out.Answer = true, r.Error.Error()
		case ans == nil || !ans.Success:
			out.Refused, out.Answer = true, "raft did not install it"
		default:
			out.Answer = "installed"
		}
		n.logger.Warn("fault injection: replayed the last snapshot received", "index", out.Index, "applied_index", out.Applied,
			"last_index", out.Last, "answer", out.Answer)
		return out, nil
	case <-time.After(timeout):
		return out, fmt.Errorf("replay a snapshot: no answer from raft within %v", timeout)
	}
}
