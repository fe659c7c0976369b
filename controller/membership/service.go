package membership

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/leadership"
	"github.com/coordd/coordd/vocab"
)

// Server is one entry of the raft configuration.
type Server struct {
	ID       string
	RaftAddr string
	Voter    bool
}

// Raft is what the service needs from the raft node's membership
// (the API adapts raftnode.Node to it). The changes are leader only.
type Raft interface {
	// Configuration is the latest raft configuration (committed or not).
	Configuration() ([]Server, error)
	AddVoter(id, raftAddr string) error
	RemoveServer(id string) error
	// TransferLeadership hands leadership to target, or to the most
	// up-to-date voter when targetID is empty.
	TransferLeadership(targetID, targetAddr string) error
	// Leader is the leader's ID as far as this node knows it ("" when none).
	Leader() (id, raftAddr string)
	// ClusterID is the ID of the cluster this member belongs to.
	ClusterID() string
}

var (
	// ErrUnknownMember: raft's configuration does not hold the member.
	ErrUnknownMember = vocab.NewSentinel(vocab.ClassNotFound, "unknown member")
	// ErrRefused: the change conflicts with the configuration (an address
	// in use, another cluster, a non-voter target, ...).
	ErrRefused = vocab.NewSentinel(vocab.ClassPrecondition, "membership change refused")
)

// Leader is what the service needs from the raft node besides
// membership: proposals to the directory and the newest applied state.
type Leader interface {
	commands.Proposer
	State() *fsm.State
}

// Directory is the FSM's member address directory (*fsm.State).
type Directory interface {
	Member(id string) (*logpb.Member, bool)
}

// Member is a raft member with the addresses the directory holds for it.
type Member struct {
	Server
	GrpcAddr, HTTPAddr string
	Leader             bool
}

// Service decides and makes membership changes on the leader. Build it
// with New.
type Service struct {
	raft     Raft
	proposer Leader
	self     string
	// poll is how often TransferLeader looks for the new leader.
	poll time.Duration
	// clock times that wait (docs/architecture.md#time).
	clock clockwork.Clock
}

// New builds the service for the member self.
func New(raft Raft, leader Leader, self string) *Service {
	return &Service{raft: raft, proposer: leader, self: self, poll: 10 * time.Millisecond, clock: clockwork.NewRealClock()}
}

// WithClock makes the service time its waits on clock (tests pass a fake).
func (s *Service) WithClock(clock clockwork.Clock) *Service {
	s.clock = clock
	return s
}

// Members lists raft's members with the addresses of the newest applied
// directory (what a membership change answers with).
func (s *Service) Members() ([]Member, error) { return s.List(s.proposer.State()) }

// List joins raft's configuration (who is a member, with what suffrage)
// with dir's addresses.
func (s *Service) List(dir Directory) ([]Member, error) {
	servers, err := s.raft.Configuration()
	if err != nil {
		return nil, err
	}
	leaderID, _ := s.raft.Leader()
	return JoinDirectory(servers, leaderID, dir), nil
}

// JoinDirectory joins a raft configuration with dir's addresses, marking the
// member leaderID as the leader.
func JoinDirectory(servers []Server, leaderID string, dir Directory) []Member {
	out := make([]Member, 0, len(servers))
	for _, srv := range servers {
		m := Member{Server: srv, Leader: srv.ID == leaderID}
		if rec, ok := dir.Member(srv.ID); ok {
			m.GrpcAddr, m.HTTPAddr = rec.GrpcAddr, rec.HttpAddr
		}
		out = append(out, m)
	}
	return out
}

// AddVoter records a new member's addresses, then adds it to raft as a
// voter. Refused when another member uses its raft address, when it
// belongs to another cluster, or when it joins from a data dir that never
// joined while it is already in the configuration (it lost its data dir,
// and its term and vote with it: it must be removed first).
func (s *Service) AddVoter(ctx context.Context, j Join) error {
	servers, err := s.raft.Configuration()
	if err != nil {
		return err
	}
	if err := s.checkJoin(servers, j); err != nil {
		return err
	}
	// Record the addresses first: a member raft knows about should always
	// be reachable through the directory.
	if err := s.commit(ctx, j.upsert); err != nil {
		return err
	}
	return s.raft.AddVoter(j.id, j.raftAddr)
}

func (s *Service) checkJoin(servers []Server, j Join) error {
	for _, srv := range servers {
		if srv.RaftAddr == j.raftAddr && srv.ID != j.id {
			return fmt.Errorf("%w: raft address %s is already used by member %s", ErrRefused, j.raftAddr, srv.ID)
		}
	}
	own := s.raft.ClusterID()
	if j.clusterID != "" && j.clusterID != own {
		return fmt.Errorf("%w: member %s belongs to cluster %s, this cluster is %s", ErrRefused, j.id, j.clusterID, own)
	}
	if _, missing := find(servers, j.id); j.clusterID == "" && j.joining && missing == nil {
		return fmt.Errorf("%w: member %s is already in the cluster but its data dir never joined it; "+
			"if it lost its data dir, remove it first (coordctl cluster remove %s), then join it again", ErrRefused, j.id, j.id)
	}
	return nil
}

// RemoveMember removes a member from raft, then forgets its addresses. A
// leader asked to remove itself hands leadership over first and answers
// with a leadership.NotLeaderError, so the caller retries at the new
// leader.
//
// A member raft no longer holds but the directory still records is
// finishing a removal: an earlier call whose raft change committed while
// its answer was an unknown outcome (leadership.ErrOutcomeUnknown) never
// got to forget the addresses. RemoveMember forgets them and succeeds, so
// retrying a removal after an unknown outcome is safe. A member neither
// holds is ErrUnknownMember.
func (s *Service) RemoveMember(ctx context.Context, r Removal) error {
	if _, err := s.server(r.id); err != nil {
		if _, recorded := s.proposer.State().Member(r.id); recorded && errors.Is(err, ErrUnknownMember) {
			return s.commit(ctx, r.remove)
		}
		return err
	}
	if r.id == s.self {
		// Removing itself, a leader would step down mid-call.
		if err := s.raft.TransferLeadership("", ""); err != nil {
			return err
		}
		return fmt.Errorf("leadership handed over before removing %s; retry: %w", r.id, &leadership.NotLeaderError{})
	}
	if err := s.raft.RemoveServer(r.id); err != nil {
		return err
	}
	return s.commit(ctx, r.remove)
}

// TransferLeader hands leadership to the named voter (any voter without a
// target) and waits, up to wait, until this node hears from a new leader;
// it returns that leader's ID ("" when none was heard from in time).
// Refused for a non-voter or this member.
func (s *Service) TransferLeader(ctx context.Context, t Transfer, wait time.Duration) (string, error) {
	var addr string
	if t.target != "" {
		srv, err := s.server(t.target)
		if err != nil {
			return "", err
		}
		if !srv.Voter {
			return "", fmt.Errorf("%w: member %s is not a voter", ErrRefused, srv.ID)
		}
		if srv.ID == s.self {
			return "", fmt.Errorf("%w: member %s already leads", ErrRefused, srv.ID)
		}
		addr = srv.RaftAddr
	}
	if err := s.raft.TransferLeadership(t.target, addr); err != nil {
		return "", err
	}
	// The transfer completes when the target wins its election.
	return s.awaitNewLeader(ctx, wait), nil
}

// Register records the client-facing addresses of a member already in
// the raft configuration. Refused when its raft address differs from
// raft's.
func (s *Service) Register(ctx context.Context, r Registration) error {
	srv, err := s.server(r.id)
	if err != nil {
		return err
	}
	if srv.RaftAddr != r.raftAddr {
		return fmt.Errorf("%w: member %s has raft address %s in the raft configuration, not %s",
			ErrRefused, r.id, srv.RaftAddr, r.raftAddr)
	}
	return s.commit(ctx, r.upsert)
}

func (s *Service) server(id string) (Server, error) {
	servers, err := s.raft.Configuration()
	if err != nil {
		return Server{}, err
	}
	return find(servers, id)
}

// find returns the server with id, or an ErrUnknownMember error.
func find(servers []Server, id string) (Server, error) {
	for _, srv := range servers {
		if srv.ID == id {
			return srv, nil
		}
	}
	return Server{}, fmt.Errorf("%w: member %q is not in the cluster", ErrUnknownMember, id)
}

// awaitNewLeader polls until a leader other than this member is known
// and returns its ID (the leader known then, possibly "", after max).
func (s *Service) awaitNewLeader(ctx context.Context, max time.Duration) string {
	deadline := s.clock.Now().Add(max)
	for s.clock.Now().Before(deadline) {
		if id, _ := s.raft.Leader(); id != "" && id != s.self {
			return id
		}
		select {
		case <-ctx.Done():
			id, _ := s.raft.Leader()
			return id
		case <-s.clock.After(s.poll):
		}
	}
	id, _ := s.raft.Leader()
	return id
}

// commit proposes c and folds an FSM refusal into an error.
func (s *Service) commit(ctx context.Context, c commands.Command) error {
	_, err := commands.Commit(ctx, s.proposer, c)
	return err
}
