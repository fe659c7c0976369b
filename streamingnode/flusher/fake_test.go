package flusher

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// fakeCoord is an in-memory coordinator for the flusher's side of the
// protocol: recovery information from what was saved, monotonic
// checkpoints, flush tasks pushed by the test, term-checked saves.
type fakeCoord struct {
	mu        sync.Mutex
	vchs      map[int64][]string
	owner     map[string]int64 // pchannel -> current term
	segs      map[int64]*fakeSeg
	cps       map[string]*coordpb.Position
	ticks     map[string]uint64
	nextID    uint64
	tasks     []*coordpb.FlushTask
	taskCh    chan struct{}
	refused   int
	cpRegress int
	cpCalls   int             // UpdateChannelCheckpoints calls
	tickCalls int             // ReportTimeTicks calls
	wanted    map[string]bool // answered as checkpoint_wanted
	tickWant  map[string]bool // answered as tick_wanted
	stale     int             // saves answered stale
	// deferSaves: that many partial saves are answered with an error and
	// recorded only after the next GetRecoveryInfo of their VChannel has
	// answered without them — a save that commits
	// after its flusher gave up on it and recovered without it.
	deferSaves int
	deferred   []*coordpb.SaveBinlogPathsRequest
}

type fakeSeg struct {
	id, coll   int64
	vch        string
	state      string
	dml, start *coordpb.Position
	logs       []int64
	rows       int64
}

func newFakeCoord(vchs map[int64][]string) *fakeCoord {
	return &fakeCoord{vchs: vchs, owner: map[string]int64{}, segs: map[int64]*fakeSeg{}, cps: map[string]*coordpb.Position{},
		ticks: map[string]uint64{}, nextID: 1_000_000, taskCh: make(chan struct{}, 1)}
}

func (f *fakeCoord) ListVirtualChannels(ctx context.Context, _ coordpb.ReadConsistency, coll int64) ([]*coordpb.CollectionVChannels, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*coordpb.CollectionVChannels
	for c, vs := range f.vchs {
		out = append(out, &coordpb.CollectionVChannels{CollectionId: c, Vchannels: vs})
	}
	return out, nil
}

func (f *fakeCoord) GetRecoveryInfo(ctx context.Context, v string) (*coordpb.GetRecoveryInfoResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	known := false
	for _, vs := range f.vchs {
		known = known || slices.Contains(vs, v)
	}
	if !known {
		return nil, status.Errorf(codes.NotFound, "vchannel %s is not known", v)
	}
	resp := &coordpb.GetRecoveryInfoResponse{Vchannel: v, SeekPosition: f.cps[v]}
	for _, s := range f.segs {
		if s.vch != v {
			continue
		}
		ref := &coordpb.SegmentRef{SegmentId: s.id, State: s.state, DmlPosition: s.dml, StartPosition: s.start, NumOfRows: s.rows}
		switch s.state {
		case "Flushed":
			resp.Flushed = append(resp.Flushed, ref)
		case "Dropped":
			resp.DroppedSegments = append(resp.DroppedSegments, ref)
		default:
			resp.Unflushed = append(resp.Unflushed, ref)
		}
	}
	var later []*coordpb.SaveBinlogPathsRequest
	for _, req := range f.deferred {
		if req.Vchannel == v {
			f.save(req)
		} else {
			later = append(later, req)
		}
	}
	f.deferred = later
	return resp, nil
}

func (f *fakeCoord) ownerOK(v string, term int64) bool {
	return f.owner[vocab.PChannelOf(v)] == term
}

func (f *fakeCoord) ReportTimeTicks(ctx context.Context, node uint64, ticks []*coordpb.ChannelTimeTick) (*coordpb.ReportTimeTicksResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tickCalls++
	resp := &coordpb.ReportTimeTicksResponse{}
	for _, t := range ticks {
		if f.ownerOK(t.Vchannel, t.PchannelTerm) && t.TimeTick > f.ticks[t.Vchannel] {
			f.ticks[t.Vchannel] = t.TimeTick
		}
		if f.wanted[t.Vchannel] {
			resp.CheckpointWanted = append(resp.CheckpointWanted, t.Vchannel)
		}
		if f.tickWant[t.Vchannel] {
			resp.TickWanted = append(resp.TickWanted, t.Vchannel)
		}
	}
	return resp, nil
}

func (f *fakeCoord) UpdateChannelCheckpoints(ctx context.Context, node uint64, cps []*coordpb.ChannelCheckpoint) (*coordpb.UpdateChannelCheckpointsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cpCalls++
	resp := &coordpb.UpdateChannelCheckpointsResponse{}
	for _, cp := range cps {
		old := f.cps[cp.Vchannel]
		switch {
		case !f.ownerOK(cp.Vchannel, cp.PchannelTerm):
			resp.Refused = append(resp.Refused, cp.Vchannel+": not the owner")
		case old != nil && cp.Position.Timestamp <= old.Timestamp:
			f.cpRegress++
			resp.Refused = append(resp.Refused, cp.Vchannel+": older than stored")
		default:
			f.cps[cp.Vchannel] = cp.Position
			resp.Accepted++
		}
	}
	return resp, nil
}

func (f *fakeCoord) SaveBinlogPaths(ctx context.Context, req *coordpb.SaveBinlogPathsRequest) (*coordpb.SaveBinlogPathsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ownerOK(req.Vchannel, req.PchannelTerm) {
		f.refused++
		return nil, fmt.Errorf("not the owner of %s at term %d", req.Vchannel, req.PchannelTerm)
	}
	if f.segs[req.SegmentId] == nil {
		return nil, fmt.Errorf("segment %d not found", req.SegmentId)
	}
	if !req.Flushed && f.deferSaves > 0 {
		f.deferSaves--
		f.deferred = append(f.deferred, req)
		return nil, fmt.Errorf("deadline exceeded (the save will commit later)")
	}
	return f.save(req), nil
}

// save applies a save the way coordd's state machine does (the parts the
// flusher relies on): stale when the segment is finished, the DML position
// is older or (after_dml) a new binlog starts at or before the stored DML
// position; otherwise binlogs append and a flushed save finishes it.
func (f *fakeCoord) save(req *coordpb.SaveBinlogPathsRequest) *coordpb.SaveBinlogPathsResponse {
	s := f.segs[req.SegmentId]
	stale := func() *coordpb.SaveBinlogPathsResponse {
		f.stale++
		return &coordpb.SaveBinlogPathsResponse{Stale: true, State: s.state}
	}
	if s.state == "Flushed" || s.state == "Dropped" {
		return stale()
	}
	for _, cp := range req.Checkpoints {
		if cp.SegmentId == s.id && s.dml != nil && cp.Position.Timestamp < s.dml.Timestamp {
			return stale()
		}
	}
	for _, fb := range req.FieldBinlogs {
		for _, b := range fb.Binlogs {
			if req.AfterDml && s.dml != nil && !slices.Contains(s.logs, b.LogId) && b.TimestampFrom <= s.dml.Timestamp {
				return stale()
			}
		}
	}
	for _, fb := range req.FieldBinlogs {
		for _, b := range fb.Binlogs {
			if !slices.Contains(s.logs, b.LogId) {
				s.logs = append(s.logs, b.LogId)
				s.rows += b.EntriesNum
			}
		}
	}
	for _, cp := range req.Checkpoints {
		if cp.SegmentId == s.id {
			s.dml = cp.Position
		}
	}
	for _, sp := range req.StartPositions {
		if sp.SegmentId == s.id && s.start == nil {
			s.start = sp.Position
		}
	}
	if !req.Flushed {
		return &coordpb.SaveBinlogPathsResponse{State: s.state}
	}
	s.state = "Flushed"
	if s.rows == 0 {
		s.state = "Dropped"
	}
	// The task leaves the set.
	var left []*coordpb.FlushTask
	for _, t := range f.tasks {
		if t.SegmentId != s.id {
			left = append(left, t)
		}
	}
	f.tasks = left
	f.notify()
	return &coordpb.SaveBinlogPathsResponse{State: s.state}
}

func (f *fakeCoord) AllocID(ctx context.Context, n uint32) (uint64, uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := f.nextID
	f.nextID += uint64(n)
	return first, n, nil
}

func (f *fakeCoord) notify() {
	select {
	case f.taskCh <- struct{}{}:
	default:
	}
}

func (f *fakeCoord) WatchFlushTasks(ctx context.Context, node, epoch uint64, fn func([]*coordpb.FlushTask) error) error {
	for {
		f.mu.Lock()
		tasks := append([]*coordpb.FlushTask(nil), f.tasks...)
		f.mu.Unlock()
		if err := fn(tasks); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.taskCh:
		}
	}
}

// segment registers a growing segment (as AssignSegmentID would).
func (f *fakeCoord) segment(id, coll int64, vch string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.segs[id] = &fakeSeg{id: id, coll: coll, vch: vch, state: "Growing"}
}

// flush asks for the segments to be flushed at term.
func (f *fakeCoord) flush(term int64, ids ...int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		s := f.segs[id]
		s.state = "Flushing"
		f.tasks = append(f.tasks, &coordpb.FlushTask{SegmentId: id, CollectionId: s.coll, Vchannel: s.vch, PchannelTerm: term, Level: "L1"})
	}
	f.notify()
}

func (f *fakeCoord) state(id int64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.segs[id].state
}

// fakeHost holds one PChannel's WAL writer.
type fakeHost struct {
	dir   string
	mu    sync.Mutex
	w     *wal.Writer
	ts    uint64
	ticks int // Tick calls (fresh time ticks: TSO allocations on a real node)
}

func (h *fakeHost) Session() (uint64, uint64) { return 7, 1 }
func (h *fakeHost) WALDir() string            { return h.dir }

func (h *fakeHost) Held() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil {
		return map[string]int64{}
	}
	return map[string]int64{h.w.PChannel(): h.w.Term()}
}

func (h *fakeHost) WALEnd(p string, term int64) (uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil || h.w.Term() != term {
		return 0, fmt.Errorf("not held")
	}
	return h.w.NextOffset(), nil
}

func (h *fakeHost) Tick(ctx context.Context, p string, term int64) (uint64, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.w == nil || h.w.Term() != term {
		return 0, 0, fmt.Errorf("not held")
	}
	h.ts++
	h.ticks++
	return h.w.NextOffset(), h.ts, nil
}

// append writes one record under the host's lock with the next timestamp.
func (h *fakeHost) append(v string, payload []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ts++
	_, err := h.w.Append(v, payload, 0, h.ts)
	return err
}
