package flush

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// MaxAssignPerCall bounds the items of one AssignSegmentID call.
const MaxAssignPerCall = 1024

// AssignRequest asks for room for rows in a VChannel's growing segments.
type AssignRequest struct {
	CollectionID, PartitionID int64
	VChannel                  string
	PChannelTerm              int64
	Rows, Bytes               uint64
}

// Assignment is a segment with room and an allocation that expires.
type Assignment struct {
	SegmentID int64
	ExpireTs  uint64
	Expire    time.Time
}

// TimeTick is one VChannel's consumed time tick, from its owner.
type TimeTick struct {
	VChannel     string
	PChannelTerm int64
	Tick         uint64
}

// segMem is this term's memory of one segment's allocations.
type segMem struct {
	bytes, rows uint64
	lastAlloc   time.Time
	expire      time.Time
	expireTs    uint64
	live        []time.Time // expiry times of allocations not yet expired
}

type allocKey struct {
	vch  string
	part int64
}

// Manager is the leader's write-path memory and routine.
type Manager struct {
	l     Leader
	tso   TSO
	clock Clock
	cfg   Config

	mu        sync.Mutex
	term      uint64
	termStart time.Time
	segs      map[int64]*segMem
	ticks     map[string]TimeTick
	keyLocks  map[allocKey]*sync.Mutex

	kick chan struct{}
	// Counters for benchmarks and metrics.
	assigned, created, tickReports atomic.Int64
	flushObserver                  func(time.Duration)
}

// New returns a manager; Run is its leader routine.
func New(l Leader, tso TSO, clock Clock, cfg Config) *Manager {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Manager{l: l, tso: tso, clock: clock, cfg: cfg.WithDefaults(), kick: make(chan struct{}, 1)}
}

// Config is the effective configuration.
func (m *Manager) Config() Config { return m.cfg }

// SetFlushObserver receives, on the leader, how long each segment took
// from its seal to Flushed.
func (m *Manager) SetFlushObserver(f func(time.Duration)) { m.flushObserver = f }

// ObserveFlushed records a segment that became Flushed (called by the
// data-path service, controller/datapath, after a SaveBinlogPaths that
// flushed it).
func (m *Manager) ObserveFlushed(sealedMs int64) {
	if m.flushObserver != nil && sealedMs > 0 {
		m.flushObserver(m.clock.Now().Sub(time.UnixMilli(sealedMs)))
	}
}

// Counters: assignments handed out, segments created, time-tick reports.
func (m *Manager) Counters() (assigned, created, tickReports int64) {
	return m.assigned.Load(), m.created.Load(), m.tickReports.Load()
}

// termLocked makes the memory belong to the current established term
// (resetting it for a new one) and returns that term.
func (m *Manager) termLocked() (uint64, error) {
	term := m.l.EstablishedTerm()
	if term == 0 {
		return 0, ErrNotLeader
	}
	if m.term != term {
		m.term, m.termStart = term, m.clock.Now()
		m.segs, m.ticks, m.keyLocks = map[int64]*segMem{}, map[string]TimeTick{}, map[allocKey]*sync.Mutex{}
	}
	return term, nil
}

// Tracked is the number of segments whose allocations are in memory.
func (m *Manager) Tracked() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.segs)
}

// Allocations is the number of allocations in memory not yet expired.
func (m *Manager) Allocations() int {
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.segs {
		for _, e := range s.live {
			if now.Before(e) {
				n++
			}
		}
	}
	return n
}

// TimeTicks returns this term's reported time ticks by VChannel.
func (m *Manager) TimeTicks() map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]uint64, len(m.ticks))
	for v, t := range m.ticks {
		out[v] = t.Tick
	}
	return out
}

func checkAssign(st *fsm.State, node uint64, r AssignRequest) error {
	if r.Bytes == 0 && r.Rows == 0 {
		return vocab.Errorf(ErrInvalid, "%s: rows and bytes are both 0", r.VChannel)
	}
	if r.Bytes > math.MaxInt64 || r.Rows > math.MaxInt64 {
		return vocab.Errorf(ErrInvalid, "%s: rows %d or bytes %d above %d", r.VChannel, r.Rows, r.Bytes, int64(math.MaxInt64))
	}
	if r.PartitionID < 0 {
		return vocab.Errorf(ErrInvalid, "negative partition id")
	}
	coll, ok := vocab.CollectionOfVChannel(r.VChannel)
	if !ok || coll != r.CollectionID {
		return vocab.Errorf(ErrInvalid, "%q is not a vchannel of collection %d", r.VChannel, r.CollectionID)
	}
	c, ok := st.Collection(coll)
	if !ok {
		return vocab.Errorf(ErrNotFound, "collection %d has no vchannels", coll)
	}
	found := false
	for _, v := range c.Vchannels {
		found = found || v == r.VChannel
	}
	if !found {
		return vocab.Errorf(ErrNotFound, "vchannel %s", r.VChannel)
	}
	if err := st.CheckChannelOwner(r.VChannel, node, r.PChannelTerm); err != nil {
		return fmt.Errorf("%w: %v", ErrNotOwner, err)
	}
	return nil
}

// AssignSegmentID answers each request with a growing segment that has
// room (creating one by command when none has) and an allocation expiring
// AllocationExpiry from now. Nothing but segment creation is logged; the
// segments are created with opts, the proposal options of the call (the
// caller's node identity, commands.CallerNode).
func (m *Manager) AssignSegmentID(ctx context.Context, node uint64, reqs []AssignRequest, opts ...commands.Option) ([]Assignment, error) {
	if node == 0 || len(reqs) == 0 || len(reqs) > MaxAssignPerCall {
		return nil, vocab.Errorf(ErrInvalid, "need a node id and 1..%d requests", MaxAssignPerCall)
	}
	st := m.l.State()
	for _, r := range reqs {
		if err := checkAssign(st, node, r); err != nil {
			return nil, err
		}
	}
	out := make([]Assignment, len(reqs))
	for i, r := range reqs {
		a, err := m.assignOne(ctx, node, r, opts)
		if err != nil {
			return nil, fmt.Errorf("assign %s: %w", r.VChannel, err)
		}
		out[i] = a
	}
	m.assigned.Add(int64(len(reqs)))
	return out, nil
}

func (m *Manager) keyLock(k allocKey) (*sync.Mutex, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.termLocked(); err != nil {
		return nil, err
	}
	l, ok := m.keyLocks[k]
	if !ok {
		l = &sync.Mutex{}
		m.keyLocks[k] = l
	}
	return l, nil
}

func (m *Manager) assignOne(ctx context.Context, node uint64, r AssignRequest, opts []commands.Option) (Assignment, error) {
	kl, err := m.keyLock(allocKey{r.VChannel, r.PartitionID})
	if err != nil {
		return Assignment{}, err
	}
	kl.Lock()
	defer kl.Unlock()
	var tried map[int64]bool
	for attempt := 0; attempt < 8; attempt++ {
		id, ok := m.pick(r, tried)
		if !ok {
			created, err := m.create(ctx, node, r, opts)
			if err != nil {
				return Assignment{}, err
			}
			id = created
		}
		a, err := m.record(id, r, m.tso.PhysicalMs())
		if err != nil {
			return Assignment{}, err
		}
		// Recorded first, checked second: a flush check that saw the
		// segment sealed also sees this allocation, or this check sees the
		// seal and the allocation moves on (the recorded one only delays
		// the flush until it expires).
		if g, ok := m.l.State().Segment(id); ok && g.State == logpb.SegmentState_SEGMENT_GROWING {
			return a, nil
		}
		if tried == nil {
			tried = map[int64]bool{}
		}
		tried[id] = true
	}
	return Assignment{}, fmt.Errorf("no growing segment stayed open for the allocation")
}

// pick returns the growing segment of (vchannel, partition) with room for
// r that is fullest (so segments fill up one at a time).
func (m *Manager) pick(r AssignRequest, skip map[int64]bool) (int64, bool) {
	st := m.l.State()
	m.mu.Lock()
	defer m.mu.Unlock()
	best, bestUsed := int64(0), int64(-1)
	for _, g := range st.SegmentsOfVChannel(r.VChannel) {
		if g.State != logpb.SegmentState_SEGMENT_GROWING || g.PartitionID != r.PartitionID || g.Level != logpb.SegmentLevel_LEVEL_L1 || skip[g.ID] {
			continue
		}
		used := g.Size
		if s, ok := m.segs[g.ID]; ok && int64(s.bytes) > used {
			used = int64(s.bytes)
		}
		if int64(r.Bytes) > m.cfg.Capacity(g.ID)-used && used > 0 {
			continue
		}
		if used > bestUsed {
			best, bestUsed = g.ID, used
		}
	}
	return best, bestUsed >= 0
}

func (m *Manager) create(ctx context.Context, node uint64, r AssignRequest, opts []commands.Option) (int64, error) {
	c, err := commands.New(&logpb.CreateSegment{CollectionId: r.CollectionID, PartitionId: r.PartitionID,
		Vchannel: r.VChannel, NodeId: node, PchannelTerm: r.PChannelTerm}, "")
	if err != nil {
		return 0, vocab.Errorf(ErrInvalid, "%w", err)
	}
	res, err := commands.Commit(ctx, m.l, c, opts...)
	var rej *commands.RejectedError
	if errors.As(err, &rej) && rej.Code == logpb.RejectCode_REJECT_STALE {
		return 0, fmt.Errorf("%w: %s", ErrNotOwner, rej.Message)
	}
	if err != nil {
		return 0, fmt.Errorf("create segment: %w", err)
	}
	m.created.Add(1)
	return res.GetSegments().GetIds()[0], nil
}

// record adds an allocation to id's memory. Its expiry is
// AllocationExpiry from now on the wall clock (the flush gate's and the
// streaming node's clock check) and, as a timestamp, AllocationExpiry past
// the TSO's current physical time tsoMs: the insert path compares a fresh
// TSO timestamp with ExpireTs, and after a failover the TSO leads the
// clock by up to one window, which a wall-clock ExpireTs would not cover.
func (m *Manager) record(id int64, r AssignRequest, tsoMs int64) (Assignment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.termLocked(); err != nil {
		return Assignment{}, err
	}
	now := m.clock.Now()
	exp := now.Add(m.cfg.AllocationExpiry)
	s, ok := m.segs[id]
	if !ok {
		s = &segMem{}
		m.segs[id] = s
	}
	s.bytes, s.rows = addCapped(s.bytes, r.Bytes), addCapped(s.rows, r.Rows)
	s.lastAlloc = now
	// Expiry as a TSO timestamp: the first timestamp of the millisecond
	// after the expiry measured on the TSO's time, so every timestamp the
	// TSO hands out within AllocationExpiry is below.
	ts := fsm.ComposeTS(max(now.UnixMilli(), tsoMs) + m.cfg.AllocationExpiry.Milliseconds() + 1)
	if exp.After(s.expire) {
		s.expire = exp
	}
	s.expireTs = max(s.expireTs, ts)
	live := s.live[:0]
	for _, e := range s.live {
		if now.Before(e) {
			live = append(live, e)
		}
	}
	s.live = append(live, exp)
	return Assignment{SegmentID: id, ExpireTs: ts, Expire: exp}, nil
}

// addCapped adds allocation sizes (each at most MaxInt64, checkAssign),
// stopping at MaxInt64 so the sum stays a valid int64 byte count.
func addCapped(a, b uint64) uint64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// ReportTimeTicks records ticks from their VChannels' owners (only ever
// forward) and wakes the flush check. Refused ticks are described.
func (m *Manager) ReportTimeTicks(node uint64, ticks []TimeTick) (accepted int, refused []string, err error) {
	st := m.l.State()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.termLocked(); err != nil {
		return 0, nil, err
	}
	m.tickReports.Add(1)
	wake := false
	for _, t := range ticks {
		if err := st.CheckChannelOwner(t.VChannel, node, t.PChannelTerm); err != nil {
			refused = append(refused, t.VChannel+": "+err.Error())
			continue
		}
		// The same bound Apply puts on every reported time tick
		// (docs/semantics.md#position-bounds), against the applied state:
		// a tick past the TSO would make every sealed segment look
		// flushable at once.
		if err := st.CheckTimeTick(t.VChannel, t.Tick); err != nil {
			refused = append(refused, t.VChannel+": "+err.Error())
			continue
		}
		old, ok := m.ticks[t.VChannel]
		if ok && old.PChannelTerm == t.PChannelTerm && old.Tick >= t.Tick {
			accepted++
			continue
		}
		m.ticks[t.VChannel] = t
		accepted++
		wake = wake || sealedUpTo(st, t.VChannel, t.Tick)
	}
	if wake {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
	return accepted, refused, nil
}

// sealedUpTo reports whether vchannel has a Sealed segment whose seal time
// tick has reached: only then can a new tick make a segment flushable
// before the next periodic round. Waking a round for every report would
// rescan every active segment at the report rate (streaming nodes report
// many times a second), which is what the periodic round avoids.
func sealedUpTo(st *fsm.State, vchannel string, tick uint64) bool {
	for _, g := range st.SegmentsOfVChannel(vchannel) {
		if g.State == logpb.SegmentState_SEGMENT_SEALED && g.SealTs <= tick {
			return true
		}
	}
	return false
}
