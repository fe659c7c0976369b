package broadcaster

import (
	"context"
	"fmt"
	"sync"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// ---- appending a step's targets ----------------------------------------------------
//
// A step appends the task's message to every target not yet acked. With a
// BatchAppender (the gRPC one) the targets are grouped by the node that
// holds their PChannel and each node gets one AppendBatch (split only past
// maxBatchItems or maxBatchPayloadBytes), the nodes concurrently; otherwise
// each target gets its own Append. Either way every target has its own
// outcome: its checkpoint, or an error handled as before (ownership errors
// rerun the task on the next assignment change, the rest back off).
// docs/architecture.md#batched-broadcast-appends.

const (
	// maxBatchItems bounds the items of one AppendBatch (the node refuses
	// more than streamingnode.MaxAppendBatchItems).
	maxBatchItems = 256
	// maxBatchPayloadBytes bounds the payload bytes of one AppendBatch
	// (each item carries the payload), well below the node's 17 MiB
	// message limit: 16 targets of the largest broadcast payload
	// (vocab.MaxBroadcastPayload, 512 KiB) still fit one batch.
	maxBatchPayloadBytes = 8 << 20
)

// stepAppends collects a step's outcomes.
type stepAppends struct {
	mu       sync.Mutex
	total    int
	cps      []*logpb.VChannelCheckpoint
	firstErr error
	failed   int
	onAssign bool
}

func (s *stepAppends) add(cp *logpb.VChannelCheckpoint, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
		if s.firstErr == nil {
			s.firstErr = err
		}
		if ownershipError(err) {
			s.onAssign = true
		}
		return
	}
	s.cps = append(s.cps, cp)
}

// result is the checkpoints of the targets that succeeded, whether a
// failure was about channel ownership, and the first error.
func (s *stepAppends) result() ([]*logpb.VChannelCheckpoint, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.firstErr != nil {
		return s.cps, s.onAssign, fmt.Errorf("%d of %d appends failed, first: %w", s.failed, s.total, s.firstErr)
	}
	return s.cps, false, nil
}

// appendAll appends bt's message to each target in parallel (bounded by
// Config.AppendParallelism calls) and returns the checkpoints of those
// that succeeded, whether a failure was about channel ownership, and the
// first error.
func (ts *termState) appendAll(st *fsm.State, bt *logpb.BroadcastTask, targets []string) ([]*logpb.VChannelCheckpoint, bool, error) {
	res := &stepAppends{total: len(targets)}
	if ba, ok := ts.m.app.(BatchAppender); ok {
		ts.appendBatched(st, bt, targets, ba, res)
	} else {
		ts.appendEach(st, bt, targets, res)
	}
	return res.result()
}

// appendEach appends to each target with its own Append.
func (ts *termState) appendEach(st *fsm.State, bt *logpb.BroadcastTask, targets []string, res *stepAppends) {
	runBounded(len(targets), ts.m.cfg.AppendParallelism, func(i int) {
		if ts.finished(bt.Id) {
			res.add(nil, errTaskFinishedHere)
			return
		}
		res.add(ts.appendOne(st, bt, targets[i]))
	})
}

// appendTarget is a target resolved against the FSM: the node holding its
// PChannel RW, and the PChannel's term.
type appendTarget struct {
	vchannel string
	pchannel string
	term     int64
	nodeID   uint64
	node     NodeTarget
}

// resolveTarget finds where v is appended: its PChannel must be ASSIGNED,
// RW, on a known node (notAssignedError otherwise).
func resolveTarget(st *fsm.State, v string) (appendTarget, error) {
	pname := vocab.PChannelOf(v)
	p, ok := st.PChannel(pname)
	if !ok {
		return appendTarget{}, &notAssignedError{fmt.Sprintf("%s: pchannel %s does not exist", v, pname)}
	}
	if p.State != logpb.PChannelState_PCHANNEL_ASSIGNED {
		return appendTarget{}, &notAssignedError{fmt.Sprintf("%s: pchannel %s is %s at term %d", v, pname, p.State, p.Term)}
	}
	if p.Mode != logpb.AccessMode_ACCESS_RW {
		return appendTarget{}, &notAssignedError{fmt.Sprintf("%s: pchannel %s is read-only at term %d", v, pname, p.Term)}
	}
	n, ok := st.StreamingNode(p.NodeId)
	if !ok {
		return appendTarget{}, &notAssignedError{fmt.Sprintf("%s: node %d of pchannel %s is unknown", v, p.NodeId, pname)}
	}
	return appendTarget{vchannel: v, pchannel: pname, term: p.Term, nodeID: p.NodeId,
		node: NodeTarget{Addr: n.Address, ID: n.Id, Epoch: n.Epoch, Bound: n.BoundNode}}, nil
}

func (ts *termState) appendOne(st *fsm.State, bt *logpb.BroadcastTask, v string) (*logpb.VChannelCheckpoint, error) {
	tg, err := resolveTarget(st, v)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ts.ctx, ts.m.cfg.AppendTimeout)
	defer cancel()
	ts.unsafeJitter(ctx)
	cp, err := ts.m.app.Append(ctx, tg.node, v, tg.term, bt.Payload, bt.Id, bt.AckSyncUp, ts.term)
	return ts.appendOutcome(bt, tg, cp, err)
}

// appendOutcome is a target's outcome from its append's answer: the
// error wrapped with the target, or a checkpoint that names it.
func (ts *termState) appendOutcome(bt *logpb.BroadcastTask, tg appendTarget, cp *logpb.VChannelCheckpoint, err error) (*logpb.VChannelCheckpoint, error) {
	if err != nil {
		if code, ok := unrecoverableCode(err); ok {
			ts.m.cfg.Metrics.appendUnrecoverable(bt.MessageType, code)
		}
		return nil, fmt.Errorf("append to %s on node %d (%s) at term %d: %w", tg.vchannel, tg.nodeID, tg.node.Addr, tg.term, err)
	}
	if cp == nil || cp.Term < 1 || cp.TimeTick == 0 {
		return nil, fmt.Errorf("append to %s on node %d: no usable checkpoint in the answer", tg.vchannel, tg.nodeID)
	}
	cp.Vchannel = tg.vchannel
	return cp, nil
}

// appendBatched groups the targets by node (a node registration: address,
// ID, epoch, bound identity) and sends each group as AppendBatch calls,
// the calls concurrently. A target whose PChannel has no writable owner
// fails alone, as with appendEach.
func (ts *termState) appendBatched(st *fsm.State, bt *logpb.BroadcastTask, targets []string, ba BatchAppender, res *stepAppends) {
	var order []NodeTarget
	groups := map[NodeTarget][]appendTarget{}
	for _, v := range targets {
		tg, err := resolveTarget(st, v)
		if err != nil {
			res.add(nil, err)
			continue
		}
		if _, ok := groups[tg.node]; !ok {
			order = append(order, tg.node)
		}
		groups[tg.node] = append(groups[tg.node], tg)
	}
	per := batchSize(len(bt.Payload))
	var chunks [][]appendTarget
	for _, node := range order {
		for g := groups[node]; len(g) > 0; {
			chunk := g[:min(per, len(g))]
			g = g[len(chunk):]
			chunks = append(chunks, chunk)
		}
	}
	runBounded(len(chunks), ts.m.cfg.AppendParallelism, func(i int) { ts.appendChunk(ba, bt, chunks[i], res) })
}

// batchSize is how many targets of a payloadLen-byte message go in one
// AppendBatch.
func batchSize(payloadLen int) int {
	return max(1, min(maxBatchItems, maxBatchPayloadBytes/max(1, payloadLen)))
}

// appendChunk sends one AppendBatch for chunk (all on one node) and
// records each target's outcome. Like a single append it is skipped once
// the task was finished elsewhere (an operator's Abandon) and bounded by
// Config.AppendTimeout; the unsafe jitter delays the whole call.
func (ts *termState) appendChunk(ba BatchAppender, bt *logpb.BroadcastTask, chunk []appendTarget, res *stepAppends) {
	if ts.finished(bt.Id) {
		for range chunk {
			res.add(nil, errTaskFinishedHere)
		}
		return
	}
	ctx, cancel := context.WithTimeout(ts.ctx, ts.m.cfg.AppendTimeout)
	defer cancel()
	ts.unsafeJitter(ctx)
	items := make([]AppendItem, len(chunk))
	for i, tg := range chunk {
		items[i] = AppendItem{VChannel: tg.vchannel, PChannelTerm: tg.term}
	}
	results := ba.AppendBatch(ctx, chunk[0].node, items, bt.Payload, bt.Id, bt.AckSyncUp, ts.term)
	for i, tg := range chunk {
		if i >= len(results) {
			res.add(ts.appendOutcome(bt, tg, nil, fmt.Errorf("append batch to %s: %d results for %d items", tg.node.Addr, len(results), len(chunk))))
			continue
		}
		res.add(ts.appendOutcome(bt, tg, results[i].Checkpoint, results[i].Err))
	}
}
