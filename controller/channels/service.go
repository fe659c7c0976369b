package channels

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Leader is what the service needs from the raft node; raftnode.Node and
// controllertest.Leader implement it.
type Leader interface {
	// State is the newest applied state (possibly behind the commit
	// index; Apply runs every guard again).
	State() *fsm.State
	// EstablishedTerm is the term this node leads in, 0 when it does not.
	EstablishedTerm() uint64
	commands.Proposer
}

// Broadcaster runs broadcasts (broadcaster.Manager).
type Broadcaster interface {
	Broadcast(ctx context.Context, req broadcaster.Checked) (broadcaster.Result, error)
}

// Rebalancer takes requests for a balance round (balancer.Balancer).
type Rebalancer interface {
	// Trigger asks for a round as soon as possible; it never blocks.
	Trigger()
}

// reportingRebalancer is a Rebalancer that can say what a round did.
type reportingRebalancer interface {
	Rebalance(ctx context.Context) (balancer.Report, error)
}

var (
	// ErrSecondary: the cluster is a replication secondary, whose
	// configuration comes from its primary.
	ErrSecondary = vocab.NewSentinel(vocab.ClassPrecondition, "cluster is a replication secondary")
	// ErrNotInstalled: a configuration broadcast completed but the
	// configuration it carried is not the installed one.
	ErrNotInstalled = vocab.NewSentinel(vocab.ClassPrecondition, "configuration not installed")
	// ErrNodeGone: the streaming node is no longer known.
	ErrNodeGone = vocab.NewSentinel(vocab.ClassNotFound, "streaming node is gone")
)

// Service serves the Channels writes on the leader. Build it with New.
type Service struct {
	leader     Leader
	broadcasts Broadcaster // nil: configurations are committed directly
	rebalancer Rebalancer  // never nil
	log        hclog.Logger
}

// New builds the service. broadcasts and rebalancer may be nil (a member
// without a broadcaster or a balancer): a configuration is then committed
// without a broadcast, and rebalance requests are dropped.
func New(leader Leader, broadcasts Broadcaster, rebalancer Rebalancer, log hclog.Logger) *Service {
	if rebalancer == nil {
		rebalancer = noRebalancer{}
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Service{leader: leader, broadcasts: broadcasts, rebalancer: rebalancer, log: log}
}

type noRebalancer struct{}

func (noRebalancer) Trigger() {}

// commit proposes c and folds an FSM refusal into an error.
func (s *Service) commit(ctx context.Context, c commands.Command) (*logpb.Result, error) {
	return commands.Commit(ctx, s.leader, c)
}
