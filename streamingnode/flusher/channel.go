package flusher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/binlog"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/streamingnode/dml"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// channel flushes one PChannel at one term.
type channel struct {
	m        *Manager
	pchannel string
	term     int64
	cancel   context.CancelFunc

	mu    sync.Mutex
	tasks []*coordpb.FlushTask // coordd's latest set for this PChannel
	wake  chan struct{}

	// Published by the running session for the metrics.
	bufferedSegs, bufferedRows, pendingTasks atomic.Int64
}

func newChannel(m *Manager, p string, term int64) *channel {
	return &channel{m: m, pchannel: p, term: term, wake: make(chan struct{}, 1)}
}

func (c *channel) setTasks(tasks []*coordpb.FlushTask) {
	c.mu.Lock()
	c.tasks = tasks
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *channel) currentTasks() []*coordpb.FlushTask {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*coordpb.FlushTask
	for _, t := range c.tasks {
		if t.PchannelTerm == c.term {
			out = append(out, t)
		}
	}
	return out
}

// run recovers and consumes until ctx ends; any error starts over from
// coordd's recovery information (the flusher's memory is only a cache).
func (c *channel) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		s := &session{c: c, log: c.m.log.With("pchannel", c.pchannel, "term", c.term)}
		err := s.run(ctx)
		c.bufferedSegs.Store(0)
		c.bufferedRows.Store(0)
		c.pendingTasks.Store(0)
		if ctx.Err() != nil {
			return
		}
		c.m.metrics.fail(classOf(err))
		s.log.Warn("flusher restarting from coordd's recovery information", "error", err)
		sleep(ctx, backoff)
		backoff = min(2*backoff, 2*time.Second)
	}
}

// vstate is one VChannel of the PChannel.
type vstate struct {
	name       string
	collection int64
	dropped    bool
	filter     *client.ReplayFilter
	sentCP     uint64    // time tick of the last checkpoint coordd accepted
	sentOffset uint64    // its WAL offset
	sentAt     time.Time // when it was accepted
}

// segBuf holds a segment's rows not yet persisted.
type segBuf struct {
	id, collection, partition int64
	vchannel                  string
	start                     *coordpb.Position
	rows                      []binlog.Row
	since                     time.Time // when its first buffered row was consumed
}

// session is one recovery plus the consumption that follows it.
type session struct {
	c        *channel
	log      hclog.Logger
	vch      map[string]*vstate
	bufs     map[int64]*segBuf
	from     uint64              // where replay started
	next     uint64              // next offset to consume
	last     *coordpb.Position   // last consumed record
	tick     uint64              // every record with a time tick <= tick is consumed
	snap     map[int64]uint64    // flush task -> WAL end when it was first seen
	seen     map[int64]time.Time // flush task -> when it was first seen
	done     map[int64]bool      // flushed in this session
	ins      dml.Insert          // the last insert consumed (its PK slice is reused)
	lastTick time.Time
	lastList time.Time // last refresh of the VChannel list
	// Idle ticks: a fresh time tick is a TSO allocation (and, on an idle
	// leader, a lease renewal in coordd's log), so a caught-up flusher with
	// nothing new takes one only when coordd wants it (wantFresh), when
	// something is buffered or flushing, or after the idle interval.
	freshAt   time.Time // when the last fresh tick was taken
	freshNext uint64    // s.next at that time
	wantFresh bool      // the last report's answer asked for a fresh tick
}

var errRestart = errors.New("flusher: replay must start earlier")

func (s *session) run(ctx context.Context) error {
	c, m := s.c, s.c.m
	s.vch, s.bufs, s.snap, s.done = map[string]*vstate{}, map[int64]*segBuf{}, map[int64]uint64{}, map[int64]bool{}
	s.seen = map[int64]time.Time{}
	colls, err := m.cfg.Coord.ListVirtualChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE, 0)
	if err != nil {
		return classed(classRecovery, fmt.Errorf("list vchannels: %w", err))
	}
	var states []client.RecoveryState
	for _, cv := range colls {
		for _, v := range cv.Vchannels {
			if vocab.PChannelOf(v) != c.pchannel || vocab.IsCChannel(v) {
				continue
			}
			st, err := s.recoverVChannel(ctx, v, cv.CollectionId)
			if err != nil {
				return err
			}
			states = append(states, st)
		}
	}
	pos, fromStart := client.EarliestSeek(states)
	if !fromStart {
		s.from = pos.Offset
	}
	s.next = s.from
	r, err := wal.NewReader(m.cfg.Host.WALDir(), c.pchannel, wal.ReaderOptions{From: s.from})
	if err != nil {
		return classed(classWAL, err)
	}
	defer r.Close()
	s.lastList = time.Now()
	s.log.Info("flusher recovered", "vchannels", len(s.vch), "seek_offset", s.from)
	for {
		caughtUp := false
		for i := 0; i < 4096; i++ {
			rec, err := r.Next(ctx)
			if err == io.EOF {
				caughtUp = true
				break
			}
			if err != nil {
				return classed(classWAL, err)
			}
			if err := s.consume(ctx, &rec); err != nil {
				return err
			}
		}
		if time.Since(s.lastList) >= m.cfg.RefreshInterval {
			if err := s.refresh(ctx); err != nil {
				return err
			}
		}
		pending := s.pendingTasks()
		if time.Since(s.lastTick) >= m.cfg.TickInterval || (caughtUp && pending) {
			if err := s.report(ctx, caughtUp); err != nil {
				return err
			}
		}
		if pending {
			if err := s.flushReady(ctx); err != nil {
				return err
			}
		}
		if err := s.saveDue(ctx); err != nil {
			return err
		}
		s.publish()
		if caughtUp {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-c.wake:
			case <-time.After(m.cfg.PollInterval):
			}
		}
	}
}

func (s *session) recoverVChannel(ctx context.Context, v string, collection int64) (client.RecoveryState, error) {
	info, err := s.c.m.cfg.Coord.GetRecoveryInfo(ctx, v)
	if err != nil {
		return client.RecoveryState{}, classed(classRecovery, fmt.Errorf("recovery info of %s: %w", v, err))
	}
	st := client.RecoveryStateOf(info)
	st.VChannel = v
	s.vch[v] = &vstate{name: v, collection: collection, dropped: st.Dropped, filter: client.NewReplayFilter(st)}
	if st.Seek != nil {
		s.vch[v].sentCP = st.Seek.Timestamp
	}
	return st, nil
}

func position(rec *wal.Record) *coordpb.Position {
	return &coordpb.Position{Term: rec.ID.Term, Offset: rec.ID.Offset, Timestamp: rec.Timestamp}
}

// consume applies one record.
func (s *session) consume(ctx context.Context, rec *wal.Record) error {
	s.next = rec.ID.Offset + 1
	s.last = position(rec)
	s.tick = max(s.tick, rec.Timestamp)
	if !dml.IsDML(rec.Payload) {
		s.advance(rec.Timestamp, "")
		return nil
	}
	ins := &s.ins // decoded in place: its rows are copied into the buffer below
	if err := dml.DecodeInsertInto(rec.Payload, ins); err != nil {
		s.c.m.metrics.fail(classDecode)
		s.log.Error("skipping an unreadable DML message", "offset", rec.ID.Offset, "error", err)
		s.advance(rec.Timestamp, "")
		return nil
	}
	vs := s.vch[rec.VChannel]
	if vs == nil {
		if err := s.addVChannel(ctx, rec.VChannel, ins.Collection); err != nil {
			return err
		}
		vs = s.vch[rec.VChannel]
	}
	keep := vs.filter.Keep(ins.Segment, rec.Timestamp)
	s.advance(rec.Timestamp, rec.VChannel)
	if !keep {
		return nil
	}
	b := s.bufs[ins.Segment]
	if b == nil {
		b = &segBuf{id: ins.Segment, collection: ins.Collection, partition: ins.Partition, vchannel: rec.VChannel, start: position(rec),
			since: s.c.m.cfg.Clock.Now()}
		s.bufs[ins.Segment] = b
	}
	for _, pk := range ins.PKs {
		b.rows = append(b.rows, binlog.Row{PK: pk, TS: rec.Timestamp})
	}
	return nil
}

// addVChannel starts following a VChannel created after recovery (found
// by a refresh of the list or by its first record). Its records all come
// after the listing recovery read, hence after where replay started;
// recovery information that needs an earlier position restarts the
// session.
func (s *session) addVChannel(ctx context.Context, v string, collection int64) error {
	st, err := s.recoverVChannel(ctx, v, collection)
	if status.Code(err) == codes.NotFound {
		// coordd no longer knows the VChannel (its collection was dropped
		// and forgotten): nothing of it is to be persisted.
		st = client.RecoveryState{VChannel: v, Dropped: true}
		s.vch[v] = &vstate{name: v, collection: collection, dropped: true, filter: client.NewReplayFilter(st)}
		return nil
	}
	if err != nil {
		return err
	}
	if !st.Dropped && st.Seek != nil && st.Seek.Offset < s.from {
		delete(s.vch, v)
		return fmt.Errorf("%w: vchannel %s needs offset %d, replay started at %d", errRestart, v, st.Seek.Offset, s.from)
	}
	return nil
}

// refresh adds the PChannel's VChannels created since the last listing,
// so they get time ticks and checkpoints before their first record.
func (s *session) refresh(ctx context.Context) error {
	s.lastList = time.Now()
	// A stale read is enough (and costs coordd no quorum round or lease
	// renewal): a VChannel this listing misses is added by its first
	// record (addVChannel, from linearizable recovery information).
	colls, err := s.c.m.cfg.Coord.ListVirtualChannels(ctx, coordpb.ReadConsistency_STALE, 0)
	if err != nil {
		s.log.Debug("listing vchannels failed", "error", err)
		return nil
	}
	for _, cv := range colls {
		for _, v := range cv.Vchannels {
			if vocab.PChannelOf(v) != s.c.pchannel || vocab.IsCChannel(v) || s.vch[v] != nil {
				continue
			}
			if err := s.addVChannel(ctx, v, cv.CollectionId); err != nil {
				return err
			}
		}
	}
	return nil
}

// advance moves every VChannel's filter (but skip's, already moved) to ts.
func (s *session) advance(ts uint64, skip string) {
	for name, vs := range s.vch {
		if name != skip {
			vs.filter.Advance(ts)
		}
	}
}

// report sends time ticks and checkpoints. When the flusher is caught up
// it first takes a fresh tick from the node, so an idle PChannel's
// VChannels still advance.
func (s *session) report(ctx context.Context, caughtUp bool) error {
	c, m := s.c, s.c.m
	s.lastTick = time.Now()
	now := m.cfg.Clock.Now()
	fresh := caughtUp && (s.wantFresh || s.tick == 0 || s.next != s.freshNext || len(s.bufs) > 0 || len(s.snap) > 0 ||
		now.Sub(s.freshAt) >= m.cfg.IdleCheckpointInterval)
	if fresh {
		s.freshAt, s.freshNext, s.wantFresh = now, s.next, false
		// Without a timestamp (coordd unreachable) or once the PChannel
		// is gone (the manager stops this flusher) the tick stays where it
		// is this round.
		next, ts, err := m.cfg.Host.Tick(ctx, c.pchannel, c.term)
		switch {
		case err != nil:
			s.log.Debug("no fresh time tick", "error", err)
		case next == s.next:
			s.tick = max(s.tick, ts)
		}
	}
	nodeID, _ := m.cfg.Host.Session()
	if s.tick == 0 || nodeID == 0 {
		return nil
	}
	earliest := map[string]*coordpb.Position{}
	for _, b := range s.bufs {
		if e := earliest[b.vchannel]; e == nil || b.start.Offset < e.Offset {
			earliest[b.vchannel] = b.start
		}
	}
	var ticks []*coordpb.ChannelTimeTick
	var cands []*coordpb.ChannelCheckpoint // checkpoints ahead of the last accepted one
	names := make([]string, 0, len(s.vch))
	for name := range s.vch {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		vs := s.vch[name]
		if vs.dropped {
			continue
		}
		ticks = append(ticks, &coordpb.ChannelTimeTick{Vchannel: name, PchannelTerm: c.term, TimeTick: s.tick})
		cp := earliest[name]
		if cp == nil {
			// Nothing buffered: replay would start at the next record.
			cp = &coordpb.Position{Term: c.term, Offset: s.next, Timestamp: s.tick}
		}
		if cp.Timestamp > vs.sentCP {
			cands = append(cands, &coordpb.ChannelCheckpoint{Vchannel: name, PchannelTerm: c.term, Position: cp})
		}
	}
	wanted := map[string]bool{}
	if len(ticks) > 0 {
		resp, err := m.cfg.Coord.ReportTimeTicks(ctx, nodeID, ticks)
		if err != nil {
			m.metrics.fail(classTimeTick)
			s.log.Debug("time tick report failed", "error", err)
		} else {
			if len(resp.Refused) > 0 {
				s.log.Debug("time ticks refused", "refused", resp.Refused)
			}
			for _, v := range resp.CheckpointWanted {
				wanted[v] = true
			}
			// Checkpoints wanted at or past a fresh tick, and sealed
			// segments waiting for one: take one at the next report.
			s.wantFresh = s.wantFresh || len(resp.TickWanted) > 0 || (!fresh && len(resp.CheckpointWanted) > 0)
		}
	}
	// A checkpoint is a raft commit on coordd: send one only when it moved
	// (its WAL position), when a flush waits on it, the first time, or
	// after the idle interval (so the checkpoint lag of an idle VChannel
	// stays bounded). A time tick alone moving is what ReportTimeTicks is
	// for (leader memory, no commit).
	var cps []*coordpb.ChannelCheckpoint
	for _, cp := range cands {
		vs := s.vch[cp.Vchannel]
		if vs.sentCP == 0 || cp.Position.Offset != vs.sentOffset || wanted[cp.Vchannel] || now.Sub(vs.sentAt) >= m.cfg.IdleCheckpointInterval {
			cps = append(cps, cp)
		}
	}
	if len(cps) > 0 {
		resp, err := m.cfg.Coord.UpdateChannelCheckpoints(ctx, nodeID, cps)
		if err != nil {
			m.metrics.fail(classCheckpoint)
			s.log.Debug("checkpoint update failed", "error", err)
			return nil
		}
		refused := map[string]bool{}
		for _, r := range resp.Refused {
			for _, cp := range cps {
				if len(r) > len(cp.Vchannel) && r[:len(cp.Vchannel)+1] == cp.Vchannel+":" {
					refused[cp.Vchannel] = true
				}
			}
		}
		for _, cp := range cps {
			if !refused[cp.Vchannel] {
				vs := s.vch[cp.Vchannel]
				vs.sentCP, vs.sentOffset, vs.sentAt = cp.Position.Timestamp, cp.Position.Offset, now
			}
		}
		if len(resp.Refused) > 0 {
			s.log.Debug("checkpoints refused", "refused", resp.Refused)
		}
	}
	return nil
}
