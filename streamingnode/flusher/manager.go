// Package flusher is the reference streaming node's flusher
// (docs/semantics.md#flusher). For every PChannel the node
// holds it consumes the WAL, buffers insert rows per segment (the write
// path named the segment in each insert message), reports time ticks and
// channel checkpoints to coordd, and when coordd says a segment must be
// flushed (WatchFlushTasks) writes its rows as one binlog object and calls
// SaveBinlogPaths with the node's (node ID, PChannel term).
//
// The flusher keeps no state of its own: when it starts on a PChannel (at
// node start, on takeover, after any error) it asks coordd for each
// VChannel's recovery information, seeks the WAL to the earliest position
// any of them needs and replays through the replay filter (package
// client), so rows already in Flushed segments are not buffered again and
// rows not yet persisted are.
package flusher

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/vocab"
)

// Host is what the flusher needs from its streaming node.
type Host interface {
	// Session is the node's registration (0, 0 while not registered).
	Session() (nodeID, epoch uint64)
	// Held lists the PChannels the node holds in RW mode, with their terms.
	Held() map[string]int64
	// WALDir is the shared WAL directory.
	WALDir() string
	// WALEnd is the offset the next append to pchannel gets, if the node
	// still holds it at term.
	WALEnd(pchannel string, term int64) (next uint64, err error)
	// Tick is a fresh timestamp ts and the WAL end next read after it was
	// taken: every record appended after next has a larger timestamp, so a
	// flusher that has consumed everything below next has consumed every
	// record with a timestamp up to ts.
	Tick(ctx context.Context, pchannel string, term int64) (next, ts uint64, err error)
}

// Coord is the part of coordd's API the flusher uses (client.Client
// implements it).
type Coord interface {
	ListVirtualChannels(ctx context.Context, consistency coordpb.ReadConsistency, collectionID int64) ([]*coordpb.CollectionVChannels, error)
	GetRecoveryInfo(ctx context.Context, vchannel string) (*coordpb.GetRecoveryInfoResponse, error)
	ReportTimeTicks(ctx context.Context, nodeID uint64, ticks []*coordpb.ChannelTimeTick) (*coordpb.ReportTimeTicksResponse, error)
	UpdateChannelCheckpoints(ctx context.Context, nodeID uint64, cps []*coordpb.ChannelCheckpoint) (*coordpb.UpdateChannelCheckpointsResponse, error)
	SaveBinlogPaths(ctx context.Context, req *coordpb.SaveBinlogPathsRequest) (*coordpb.SaveBinlogPathsResponse, error)
	AllocID(ctx context.Context, count uint32) (first uint64, n uint32, err error)
	WatchFlushTasks(ctx context.Context, nodeID, epoch uint64, fn func([]*coordpb.FlushTask) error) error
}

// Config configures a Manager.
type Config struct {
	Host   Host
	Coord  Coord
	Store  objectstore.Store
	Logger hclog.Logger
	// TickInterval: how often time ticks and checkpoints are reported
	// (default 200ms).
	TickInterval time.Duration
	// IdleCheckpointInterval: a VChannel whose checkpoint only moved in
	// time (no new records) reports it at most this often, unless coordd
	// says a flush waits on it (default 1m; see report).
	IdleCheckpointInterval time.Duration
	// PollInterval: how often a caught-up flusher looks for new records
	// (default 10ms).
	PollInterval time.Duration
	// ReconcileInterval: how often the manager compares the PChannels it
	// flushes with those the node holds (default 50ms).
	ReconcileInterval time.Duration
	// RefreshInterval: how often a flusher lists VChannels to find new
	// ones (default 1s).
	RefreshInterval time.Duration
	// SaveInterval: a growing segment whose oldest buffered row has waited
	// this long has its buffered rows saved (a partial save: binlog
	// written, SaveBinlogPaths without flushing), so the VChannel's
	// checkpoint moves past them and a recovery replays less. 0: never by
	// age.
	SaveInterval time.Duration
	// SaveBytes: a growing segment with at least this many bytes buffered
	// (16 per row: primary key and time tick) is saved the same way. 0:
	// never by size.
	SaveBytes int64
	// Clock times partial saves and flush latency (default: the real clock).
	Clock clockwork.Clock
}

// Manager runs one flusher per PChannel the node holds and routes coordd's
// flush tasks to them.
type Manager struct {
	cfg Config
	log hclog.Logger

	metrics *Metrics

	mu       sync.Mutex
	channels map[string]*channel
	tasks    map[string][]*coordpb.FlushTask // by PChannel, coordd's latest set
}

// New returns a manager; Run starts it.
func New(cfg Config) *Manager {
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 200 * time.Millisecond
	}
	if cfg.IdleCheckpointInterval <= 0 {
		cfg.IdleCheckpointInterval = time.Minute
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 10 * time.Millisecond
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 50 * time.Millisecond
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	m := &Manager{cfg: cfg, log: cfg.Logger.Named("flusher"), channels: map[string]*channel{}, tasks: map[string][]*coordpb.FlushTask{}}
	m.metrics = newMetrics(m)
	return m
}

// Collectors are the flusher's Prometheus metrics, for the node's registry.
func (m *Manager) Collectors() []prometheus.Collector { return m.metrics.collectors() }

// Run follows the node's PChannels and coordd's flush tasks until ctx
// ends, then stops every channel flusher.
func (m *Manager) Run(ctx context.Context) {
	var wg sync.WaitGroup
	var watchCancel context.CancelFunc
	var watchID, watchEpoch uint64
	t := time.NewTicker(m.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		id, epoch := m.cfg.Host.Session()
		if (id != watchID || epoch != watchEpoch) && watchCancel != nil {
			watchCancel()
			watchCancel = nil
		}
		if id != 0 && watchCancel == nil {
			var wctx context.Context
			wctx, watchCancel = context.WithCancel(ctx)
			watchID, watchEpoch = id, epoch
			wg.Add(1)
			go func() {
				defer wg.Done()
				m.watchTasks(wctx, id, epoch)
			}()
		}
		m.reconcile(ctx, &wg)
		select {
		case <-ctx.Done():
			if watchCancel != nil {
				watchCancel()
			}
			m.mu.Lock()
			for _, c := range m.channels {
				c.cancel()
			}
			m.mu.Unlock()
			wg.Wait()
			return
		case <-t.C:
		}
	}
}

// reconcile starts a flusher for every held PChannel (at its term) and
// stops those of PChannels no longer held at their term.
func (m *Manager) reconcile(ctx context.Context, wg *sync.WaitGroup) {
	held := m.cfg.Host.Held()
	m.mu.Lock()
	defer m.mu.Unlock()
	for p, c := range m.channels {
		if term, ok := held[p]; !ok || term != c.term {
			m.log.Info("stopping flusher", "pchannel", p, "term", c.term)
			c.cancel()
			delete(m.channels, p)
		}
	}
	for p, term := range held {
		if _, ok := m.channels[p]; ok {
			continue
		}
		c := newChannel(m, p, term)
		cctx, cancel := context.WithCancel(ctx)
		c.cancel = cancel
		m.channels[p] = c
		c.setTasks(m.tasks[p])
		m.log.Info("starting flusher", "pchannel", p, "term", term)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(cctx)
		}()
	}
}

// watchTasks follows WatchFlushTasks for one session.
func (m *Manager) watchTasks(ctx context.Context, id, epoch uint64) {
	for ctx.Err() == nil {
		err := m.cfg.Coord.WatchFlushTasks(ctx, id, epoch, func(tasks []*coordpb.FlushTask) error {
			m.setTasks(tasks)
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		m.log.Debug("flush task stream ended; following it again", "error", err)
		sleep(ctx, 200*time.Millisecond)
	}
}

func (m *Manager) setTasks(tasks []*coordpb.FlushTask) {
	by := map[string][]*coordpb.FlushTask{}
	for _, t := range tasks {
		p := vocab.PChannelOf(t.Vchannel)
		by[p] = append(by[p], t)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks = by
	for p, c := range m.channels {
		c.setTasks(by[p])
	}
}

// Flushing reports, per PChannel the manager flushes, its term.
func (m *Manager) Flushing() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.channels))
	for p, c := range m.channels {
		out[p] = c.term
	}
	return out
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
