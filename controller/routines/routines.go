// Package routines builds every leader-only controller of a member and the
// request services over them, and runs the controllers as one leader
// routine, in a defined order. It is the one place the leader's work is
// wired, for serving and tests alike: cmd/coordd registers Set.Run on the
// raft node, and the API server serves requests with the services New
// built (controller/datapath and controller/channels; tests put their
// fakes in through Config.Doubles, never past New).
//
// Order at each established term (docs/architecture.md#leader-routines):
//  1. the node-health tracker gives every live node a fresh TTL
//     (synchronously, so no one reads a previous term's sessions);
//  2. then, concurrently: the TSO window, the node-health watch, the
//     balancer, the broadcaster, the segment (flush) manager, with an
//     object store the manifest orphan collector, and last the routines
//     of layers above the controllers (Config.Extra: the API's bootstrap
//     token installer), which this package cannot import.
//
// Run returns when every controller has returned after ctx ends.
package routines

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/controller/allocator"
	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/controller/datapath"
	"github.com/coordd/coordd/controller/flush"
	"github.com/coordd/coordd/controller/manifest"
	"github.com/coordd/coordd/controller/nodehealth"
	"github.com/coordd/coordd/fsm"
)

// Name is the name Set.Run is registered under on the raft node.
const Name = "controllers"

// Node is what the controllers and services need from the raft node;
// raftnode.Node implements it. Propose's contract is commands.Proposer's.
type Node interface {
	State() *fsm.State
	StateChanged() <-chan struct{}
	EstablishedTerm() uint64
	IsLeader() bool
	VerifyLeader(ctx context.Context) error
	LinearizableRead(ctx context.Context) (*fsm.State, error)
	commands.Proposer
}

// Broadcasts is the broadcaster as the services and the API use it
// (broadcaster.Manager).
type Broadcasts interface {
	// Broadcast commits a task and waits until it is a TOMBSTONE.
	Broadcast(ctx context.Context, req broadcaster.Checked) (broadcaster.Result, error)
	// Ack commits a streaming node's ack of an ack_sync_up task.
	Ack(ctx context.Context, ack broadcaster.Ack) error
	// Retry wakes a pending task's scheduler now.
	Retry(id uint64) error
	// Abandon tombstones a pending task without its callback.
	Abandon(ctx context.Context, id uint64, reason string) error
}

// Sessions is the node-health tracker as the services and the API use it
// (nodehealth.Tracker).
type Sessions interface {
	datapath.Sessions
	// SilentAfter is how long node may go without a heartbeat before it
	// counts as silent (docs/operations.md#silent-streaming-nodes).
	SilentAfter(node uint64) time.Duration
}

// Doubles replace controllers in the services' view (tests only): a set
// one is what the services and Set's fields of the same name use, while
// the controller it stands in for (if configured) still runs its routine.
type Doubles struct {
	Broadcasts Broadcasts
	Sessions   Sessions
	Rebalancer channels.Rebalancer
}

// Config configures every controller. Balancer and Broadcaster are
// optional: nil leaves that controller out (tests of other parts).
type Config struct {
	NodeHealth nodehealth.Config
	TSO        allocator.TSOConfig
	// IDBatch is how many IDs one ReserveIDs takes (0: the default).
	IDBatch uint64
	// UnsafeIDReuse breaks the ID allocator on purpose (see
	// allocator.IDs.UnsafeSkipReservation); test-only.
	UnsafeIDReuse bool
	Data          flush.Config
	DataClock     flush.Clock // nil: the real clock
	Balancer      *balancer.Config
	Broadcaster   *broadcaster.Config
	// Appender sends broadcast appends (nil: gRPC to the streaming nodes,
	// with StreamingTLS).
	Appender broadcaster.Appender
	// StreamingTLS, when set, is the TLS of the default appender's
	// connections to streaming nodes (balancer.Config.StreamingTLS is the
	// balancer's).
	StreamingTLS *tls.Config
	// Manifest configures manifest commits and the orphan collector (no
	// Store: commits are refused and the collector does not run).
	Manifest manifest.Config
	// Logger is the services' logger (nil: none).
	Logger hclog.Logger
	// Doubles are tests' fakes for the services (see Doubles).
	Doubles Doubles
	// Extra are leader routines of the layers above (cmd/coordd passes the
	// API's bootstrap-token installer), started after the controllers, in
	// this order. Registering them here rather than on the raft node keeps
	// every leader routine in one list with one order.
	Extra []Routine
}

// Routine is a named leader routine: run is called with the routine's
// context (ended when leadership of term ends), the established term and
// the routine's proposer (raftnode.LeaderRoutine: decisions of term that
// wait for room in a full proposal queue), which it proposes through.
type Routine struct {
	Name string
	Run  func(ctx context.Context, term uint64, p commands.Proposer)
}

// Set is every leader-only controller of a member.
type Set struct {
	Health      *nodehealth.Tracker
	TSO         *allocator.TSO
	IDs         *allocator.IDs
	Data        *flush.Manager
	Manifests   *manifest.Committer
	Balancer    *balancer.Balancer   // nil when not configured
	Broadcaster *broadcaster.Manager // nil when not configured
	// The services' view of the controllers above (or of Config.Doubles):
	// Broadcasts is nil without a broadcaster, Rebalancer nil without a
	// balancer.
	Broadcasts Broadcasts
	Sessions   Sessions
	Rebalancer channels.Rebalancer
	// Channels serves the Channels API's writes with the balancer and
	// the broadcaster above (it runs no routine of its own).
	Channels *channels.Service
	// DataPath serves the data path's requests (write path, sessions,
	// imports) over the controllers above.
	DataPath *datapath.Service

	extra []Routine
	// starting, if set, is called before each concurrent routine starts
	// (a test's view of the order).
	starting func(name string)
}

// New builds the controllers. A configuration error names the controller.
func New(node Node, cfg Config) (*Set, error) {
	if node == nil {
		return nil, errors.New("routines: a node is required")
	}
	s := &Set{
		Health: nodehealth.New(node, cfg.NodeHealth),
		TSO:    allocator.NewTSO(node, cfg.TSO),
		IDs:    allocator.NewIDs(node, cfg.IDBatch),
	}
	for _, r := range cfg.Extra {
		if r.Name == "" || r.Run == nil {
			return nil, fmt.Errorf("routines: extra routine %q needs a name and a function", r.Name)
		}
	}
	s.extra = append([]Routine(nil), cfg.Extra...)
	if cfg.UnsafeIDReuse {
		s.IDs.UnsafeSkipReservation()
	}
	s.Data = flush.New(node, s.TSO, cfg.DataClock, cfg.Data)
	s.Manifests = manifest.New(node, cfg.Manifest)
	if cfg.Balancer != nil {
		b, err := balancer.New(node, s.Health, *cfg.Balancer)
		if err != nil {
			return nil, fmt.Errorf("balancer: %w", err)
		}
		s.Balancer = b
	}
	if cfg.Broadcaster != nil {
		app := cfg.Appender
		if app == nil {
			app = broadcaster.NewGRPCAppender(cfg.StreamingTLS)
		}
		m, err := broadcaster.New(node, app, *cfg.Broadcaster)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("broadcaster: %w", err)
		}
		s.Broadcaster = m
	}
	s.services(node, cfg)
	return s, nil
}

// services builds the request services over the set's controllers, or
// over the doubles cfg puts in their place. A controller left out is left
// out of the services too (a nil pointer must not become a non-nil
// interface).
func (s *Set) services(node Node, cfg Config) {
	s.Sessions = s.Health
	if cfg.Doubles.Sessions != nil {
		s.Sessions = cfg.Doubles.Sessions
	}
	if s.Broadcaster != nil {
		s.Broadcasts = s.Broadcaster
	}
	if cfg.Doubles.Broadcasts != nil {
		s.Broadcasts = cfg.Doubles.Broadcasts
	}
	if s.Balancer != nil {
		s.Rebalancer = s.Balancer
	}
	if cfg.Doubles.Rebalancer != nil {
		s.Rebalancer = cfg.Doubles.Rebalancer
	}
	var b channels.Broadcaster
	var db datapath.Broadcasts
	if s.Broadcasts != nil {
		b, db = s.Broadcasts, s.Broadcasts
	}
	s.Channels = channels.New(node, b, s.Rebalancer, cfg.Logger)
	s.DataPath = datapath.New(datapath.Deps{Leader: node, TSO: s.TSO, Flush: s.Data,
		Revisions: s.Manifests, Broadcasts: db, Sessions: s.Sessions})
}

// concurrent lists what Run starts after the health reset, in start order.
func (s *Set) concurrent() []Routine {
	rs := []Routine{{"tso-window", s.TSO.Run}, {"node-health", s.Health.Watch}}
	if s.Balancer != nil {
		rs = append(rs, Routine{"balancer", s.Balancer.Run})
	}
	if s.Broadcaster != nil {
		rs = append(rs, Routine{"broadcaster", s.Broadcaster.Run})
	}
	rs = append(rs, Routine{"segments", s.Data.Run})
	if s.Manifests.Store() != nil {
		rs = append(rs, Routine{"manifest-gc", s.Manifests.RunGC})
	}
	return append(rs, s.extra...)
}

// Run is the leader routine of the whole set (see the package doc for the
// order), handing each routine p, the proposer raftnode gave the set. It
// returns once every controller has returned after ctx ends.
func (s *Set) Run(ctx context.Context, term uint64, p commands.Proposer) {
	s.Health.Reset()
	var wg sync.WaitGroup
	for _, r := range s.concurrent() {
		if s.starting != nil {
			s.starting(r.Name)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.Run(ctx, term, p)
		}()
	}
	wg.Wait()
}

// Close releases what the controllers hold (connections, leader memory).
func (s *Set) Close() {
	if st := s.Manifests.Store(); st != nil {
		st.Close()
	}
	if s.Balancer != nil {
		s.Balancer.Close()
	}
	if s.Broadcaster != nil {
		s.Broadcaster.Close()
	}
}
