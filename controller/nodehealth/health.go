// Package nodehealth tracks streaming-node sessions on the leader.
//
// Heartbeats are liveness data that change every second, so they stay in
// leader memory (docs/architecture.md#rules, rule 5); only the decision they lead to — a node
// is down — goes through the log, as MarkStreamingNodeDown with the node's
// epoch as a guard. A new leader knows nothing about past heartbeats, so it
// gives every live node a fresh TTL before judging it.
//
// A node is healthy (may receive channels) when it is UP in the FSM, has
// heartbeated within the TTL, and has reported seeing the assignment stream
// at least up to its own registration.
//
// Heartbeats also list the WALs a node really holds; an ASSIGNED PChannel
// its owner stops listing is marked UNAVAILABLE so the balancer reassigns
// it (lostwal.go).
package nodehealth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// Leader is what the tracker needs from the raft node. raftnode.Node
// implements it.
type Leader interface {
	// State is the newest state applied on this node: immutable, never nil,
	// and possibly behind the leader's commit index. Guards that matter run
	// again inside Apply, so a decision read from it may be stale but never
	// unsafe.
	State() *fsm.State
	// Propose commits a command; see commands.Proposer for its error
	// contract. The routine proposes through the proposer raftnode hands
	// it instead (Watch), as decisions of its term.
	commands.Proposer
}

// Config tunes the tracker.
type Config struct {
	TTL time.Duration // default 10s
	// Clock reads the time and runs the expiry ticker; default the real
	// clock. Tests pass a fake and advance it.
	Clock  clockwork.Clock
	Logger hclog.Logger
	// Metrics (optional) counts lost WALs.
	Metrics *Metrics
}

type session struct {
	epoch    uint64
	lastSeen time.Time
	seen     fsm.AssignmentVersion
	misses   map[string]miss // lost-WAL judgement: pchannel -> heartbeats in a row without it
	interval time.Duration   // how often the node says it heartbeats (0: not said; silence.go)
}

// Tracker holds heartbeat times for the current leadership term.
type Tracker struct {
	leader Leader
	cfg    Config

	// checkedAt is the clock reading (Unix ns) of the last expiry check Run
	// finished, so a test knows when a clock advance has been acted on.
	checkedAt atomic.Int64

	mu       sync.Mutex
	sessions map[uint64]*session
	changed  chan struct{}      // closed when some node's health may have changed
	idx      assigned           // ASSIGNED channels per owner (lostwal.go)
	lost     map[string]lostWAL // judged lost, not yet proposed: "pchannel@term" -> channel
	lostKick chan struct{}      // wakes Watch to propose the lost channels
}

// New returns a tracker.
func New(leader Leader, cfg Config) *Tracker {
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clockwork.NewRealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Tracker{leader: leader, cfg: cfg, sessions: map[uint64]*session{}, changed: make(chan struct{}),
		lost: map[string]lostWAL{}, lostKick: make(chan struct{}, 1)}
}

// TTL is the session timeout.
func (t *Tracker) TTL() time.Duration { return t.cfg.TTL }

// Changed returns a channel closed when a node's health may have changed.
func (t *Tracker) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

func (t *Tracker) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// Heartbeat records a heartbeat from node at epoch having seen version.
// The caller has checked that the node is live in the FSM.
func (t *Tracker) Heartbeat(node, epoch uint64, seen fsm.AssignmentVersion) {
	t.HeartbeatHeld(node, epoch, seen, nil, 0)
}

// HeartbeatHeld is Heartbeat with the WALs the node reports it holds
// (pchannel -> term; nil means the node does not report them, and its
// channels are not judged by it) and the interval it says it heartbeats
// at (0: not said), from which SilentAfter judges it late.
func (t *Tracker) HeartbeatHeld(node, epoch uint64, seen fsm.AssignmentVersion, held map[string]int64, interval time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Clock.Now()
	s, ok := t.sessions[node]
	// was: healthy as far as the session goes (a lapsed session revived by
	// this heartbeat is a health change too).
	was := ok && s.epoch == epoch && now.Sub(s.lastSeen) <= t.cfg.TTL && t.readyLocked(node, s)
	if !ok || s.epoch != epoch {
		s = &session{epoch: epoch}
		t.sessions[node] = s
	}
	s.lastSeen = now
	if interval > 0 {
		s.interval = interval
	}
	if s.seen.Less(seen) {
		s.seen = seen
	}
	if held != nil {
		t.heldLocked(node, s, held)
	}
	if !was && t.readyLocked(node, s) {
		t.notifyLocked()
	}
}

// readyLocked: the node has seen the stream up to its registration.
func (t *Tracker) readyLocked(node uint64, s *session) bool {
	rec, ok := t.leader.State().StreamingNode(node)
	if !ok {
		return false
	}
	return !s.seen.Less(fsm.VersionOf(rec.RegisteredVersion))
}

// Healthy reports whether node may hold channels now: UP in the FSM,
// heartbeating within the TTL, and caught up to its registration.
func (t *Tracker) Healthy(node uint64) bool {
	rec, ok := t.leader.State().StreamingNode(node)
	if !ok || rec.State != logpb.NodeState_NODE_UP {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[node]
	if !ok || s.epoch != rec.Epoch || t.cfg.Clock.Now().Sub(s.lastSeen) > t.cfg.TTL {
		return false
	}
	return t.readyLocked(node, s)
}

// LastSeen returns how long ago node last heartbeated (ok=false if never
// in this leadership term).
func (t *Tracker) LastSeen(node uint64) (time.Duration, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[node]
	if !ok {
		return 0, false
	}
	return t.cfg.Clock.Now().Sub(s.lastSeen), true
}

// Reset gives every live node a fresh TTL; Run calls it when leadership
// starts, and so must whoever runs Watch instead, before anything reads
// the tracker in the new term.
// A node live before this term was admitted by an earlier leader, so it
// counts as caught up to its registration: otherwise every node would be
// unhealthy until its first heartbeat to this leader, and the first one to
// heartbeat would be handed every other node's channels.
func (t *Tracker) Reset() {
	now := t.cfg.Clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sessions = map[uint64]*session{}
	clear(t.lost)
	for _, n := range t.leader.State().StreamingNodes() {
		if n.State != logpb.NodeState_NODE_DOWN {
			t.sessions[n.Id] = &session{epoch: n.Epoch, lastSeen: now, seen: fsm.VersionOf(n.RegisteredVersion)}
		}
	}
	t.notifyLocked()
}

// expired lists live nodes whose session has timed out. A node first seen
// now (registered during this term) starts its TTL now.
func (t *Tracker) expired(now time.Time) []*logpb.StreamingNodeRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	nodes := t.leader.State().StreamingNodes()
	v := judge(nodes, t.sessions, now, t.cfg.TTL)
	for _, n := range v.firstSeen {
		t.sessions[n.Id] = &session{epoch: n.Epoch, lastSeen: now}
	}
	t.pruneLocked(nodes)
	return v.down
}

// pruneLocked forgets the sessions of nodes that are DOWN or no longer in
// the FSM, so crash-looping nodes (a new ID per restart) cannot grow the
// map for as long as one leader reigns. A late heartbeat of such a node
// is refused by the API (it is not live), so nothing recreates them.
func (t *Tracker) pruneLocked(nodes []*logpb.StreamingNodeRecord) {
	live := make(map[uint64]bool, len(nodes))
	for _, n := range nodes {
		if n.State != logpb.NodeState_NODE_DOWN {
			live[n.Id] = true
		}
	}
	for id := range t.sessions {
		if !live[id] {
			delete(t.sessions, id)
		}
	}
}

// Sessions is the number of sessions the tracker keeps.
func (t *Tracker) Sessions() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.sessions)
}

// verdict is one tick's decision.
type verdict struct {
	down      []*logpb.StreamingNodeRecord // live, silent for more than the TTL
	firstSeen []*logpb.StreamingNodeRecord // live, no session at this epoch yet
}

// judge is the tracker's decision as a pure function of the FSM's nodes,
// the sessions and the time: a live node is down when its session is older
// than ttl at now; a live node without a session at its epoch is first
// seen now. DOWN nodes are not judged again.
func judge(nodes []*logpb.StreamingNodeRecord, sessions map[uint64]*session, now time.Time, ttl time.Duration) verdict {
	var v verdict
	for _, n := range nodes {
		if n.State == logpb.NodeState_NODE_DOWN {
			continue
		}
		s, ok := sessions[n.Id]
		switch {
		case !ok || s.epoch != n.Epoch:
			v.firstSeen = append(v.firstSeen, n)
		case now.Sub(s.lastSeen) > ttl:
			v.down = append(v.down, n)
		}
	}
	return v
}

// Run is the leader routine: fresh TTLs now (Reset), then Watch.
func (t *Tracker) Run(ctx context.Context, term uint64, p commands.Proposer) {
	t.Reset()
	t.Watch(ctx, term, p)
}

// Watch proposes every node whose session expires as down, until ctx
// ends, through the leader routine's proposer p as decisions of term.
// Reset must have run in this term first.
func (t *Tracker) Watch(ctx context.Context, term uint64, p commands.Proposer) {
	decider := commands.Fenced(p, term) // every proposal carries this term
	tick := t.cfg.Clock.NewTicker(max(t.cfg.TTL/40, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.Chan():
		case <-t.lostKick:
		}
		t.markLost(ctx, decider)
		now := t.cfg.Clock.Now()
		t.markExpired(ctx, decider, now)
		t.checkedAt.Store(now.UnixNano())
	}
}

// markExpired proposes every node expired at now as down, through
// decider (the routine's proposer, fenced by its term).
func (t *Tracker) markExpired(ctx context.Context, decider commands.Proposer, now time.Time) {
	for _, n := range t.expired(now) {
		reason := fmt.Sprintf("no heartbeat for more than %v", t.cfg.TTL)
		_, err := commands.CommitNew(ctx, decider, &logpb.MarkStreamingNodeDown{NodeId: n.Id, Epoch: n.Epoch, Reason: reason}, "")
		var rej *commands.RejectedError
		switch {
		case errors.As(err, &rej):
			// Apply decided against it (the node moved on meanwhile);
			// watchers still learn the state changed.
		case err != nil:
			t.cfg.Logger.Warn("marking node down failed", "node", n.Id, "error", err)
			continue
		default:
			t.cfg.Logger.Info("streaming node down", "node", n.Id, "address", n.Address, "reason", reason)
		}
		t.mu.Lock()
		t.notifyLocked()
		t.mu.Unlock()
	}
}
