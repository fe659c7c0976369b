package datapath

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

// Leader is what the service needs from the raft node.
type Leader interface {
	// State is the newest applied state (immutable, never nil).
	State() *fsm.State
	// LinearizableRead is a state that includes every write committed
	// before the call (raftnode.Node.LinearizableRead).
	LinearizableRead(ctx context.Context) (*fsm.State, error)
	// EstablishedTerm is the term this node leads in (0: not leading).
	EstablishedTerm() uint64
	// IsLeader reports whether this node is the raft leader, established
	// or not yet.
	IsLeader() bool
	// Propose commits a command (see commands.Proposer); the service
	// commits with commands.Commit, so an Apply rejection is a
	// *commands.RejectedError like every other refusal.
	commands.Proposer
}

// TSO hands out timestamps (allocator.TSO).
type TSO interface {
	Alloc(ctx context.Context, count uint32) (uint64, error)
}

// Flusher is the leader's write-path memory (flush.Manager).
type Flusher interface {
	AssignSegmentID(ctx context.Context, node uint64, reqs []flush.AssignRequest, opts ...commands.Option) ([]flush.Assignment, error)
	ReportTimeTicks(node uint64, ticks []flush.TimeTick) (accepted int, refused []string, err error)
	SealCollection(ctx context.Context, collection int64, sealTs uint64) ([]int64, error)
	ObserveFlushed(sealedMs int64)
}

// Revisions checks a named manifest revision before a save or an import
// publishes it (manifest.Committer.CheckNamedRevision).
type Revisions interface {
	CheckNamedRevision(ctx context.Context, st *fsm.State, seg int64, pointer string) error
}

// Broadcasts commits a broadcast and waits for it (broadcaster.Manager).
type Broadcasts interface {
	Broadcast(ctx context.Context, req broadcaster.Checked) (broadcaster.Result, error)
}

// Sessions is the leader's view of streaming-node sessions
// (nodehealth.Tracker).
type Sessions interface {
	HeartbeatHeld(node, epoch uint64, seen fsm.AssignmentVersion, held map[string]int64, interval time.Duration)
	LastSeen(node uint64) (time.Duration, bool)
	TTL() time.Duration
}

// Deps are the controllers the service composes. Broadcasts may be nil
// (FlushAll then answers ErrNoBroadcaster); Clock nil is the real clock.
type Deps struct {
	Leader     Leader
	TSO        TSO
	Flush      Flusher
	Revisions  Revisions
	Broadcasts Broadcasts
	Sessions   Sessions
	Clock      clockwork.Clock
}

// Service serves the data path's requests (see the package doc).
type Service struct {
	l          Leader
	tso        TSO
	flush      Flusher
	revisions  Revisions
	broadcasts Broadcasts
	sessions   Sessions
	clock      clockwork.Clock
	wants      checkpointWants
}

// New returns the service over d.
func New(d Deps) *Service {
	if d.Clock == nil {
		d.Clock = clockwork.NewRealClock()
	}
	return &Service{l: d.Leader, tso: d.TSO, flush: d.Flush, revisions: d.Revisions,
		broadcasts: d.Broadcasts, sessions: d.Sessions, clock: d.Clock}
}

// Errors of the service the API maps to status codes. Texts repeat the
// API's own classes, so a caller reads the same message either way.
var (
	// ErrInvalid: a request that is wrong whatever the state (it is
	// commands.ErrInvalid: a request shape and the command built from it
	// are refused alike).
	ErrInvalid = commands.ErrInvalid
	// ErrNotFound: the collection or session does not exist (it is
	// flush.ErrNotFound).
	ErrNotFound = flush.ErrNotFound
	// ErrPrecondition: the state does not allow the request now (a live
	// session holds the address, a session of another epoch, a FlushAll
	// whose callback has not recorded it). It is the class's own sentinel,
	// vocab.ErrPrecondition.
	ErrPrecondition = vocab.ErrPrecondition
	// ErrNoBroadcaster: this member was built without a broadcaster.
	ErrNoBroadcaster = vocab.NewSentinel(vocab.ClassUnavailable, "broadcaster not configured on this node")
)

// established is this node's term when it is the established leader, or
// the "not leader"/"not yet established" error otherwise.
func (s *Service) established() (uint64, error) {
	if term := s.l.EstablishedTerm(); term != 0 {
		return term, nil
	}
	if s.l.IsLeader() {
		return 0, leadership.ErrNotEstablished
	}
	return 0, &leadership.NotLeaderError{}
}

// commitNew builds body with commands.New and commits it with opts: for
// a command the service decides on the leader after the request was
// checked.
func (s *Service) commitNew(ctx context.Context, body proto.Message, opts ...commands.Option) (*logpb.Result, error) {
	c, err := commands.New(body, "")
	if err != nil {
		return nil, vocab.Errorf(ErrInvalid, "%w", err)
	}
	return commands.Commit(ctx, s.l, c, opts...)
}
