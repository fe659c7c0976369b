package tokens

import (
	"context"
	"errors"
	"time"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// Leader is what the service needs from the raft node; raftnode.Node
// implements it.
type Leader interface {
	// State is the newest applied state.
	State() *fsm.State
	commands.Proposer
}

// Service serves the Tokens writes on the leader and reads the token table
// of this member. Build it with New.
type Service struct{ leader Leader }

// New builds the service.
func New(leader Leader) *Service { return &Service{leader: leader} }

// Create commits c and answers with the record as Apply stored it (its
// creation time) and the token's secret, shown this once.
func (s *Service) Create(ctx context.Context, c Create) (*coordpb.CreateTokenResponse, error) {
	if !c.cmd.Checked() {
		return nil, vocab.Errorf(commands.ErrInvalid, "a token request not made by tokens.NewCreate")
	}
	if _, err := commands.Commit(ctx, s.leader, c.cmd); err != nil {
		return nil, err
	}
	stored, ok := s.leader.State().Token(c.tok.ID)
	if !ok { // revoked since the commit
		return nil, vocab.Errorf(vocab.ErrNotFound, "token %s was revoked right after its creation", c.tok.ID)
	}
	return &coordpb.CreateTokenResponse{Token: info(stored), Secret: c.tok.String()}, nil
}

// Revoke commits r (Apply refuses an unknown ID as not found).
func (s *Service) Revoke(ctx context.Context, r Revoke) error {
	if !r.cmd.Checked() {
		return vocab.Errorf(commands.ErrInvalid, "a token request not made by tokens.NewRevoke")
	}
	_, err := commands.Commit(ctx, s.leader, r.cmd)
	return err
}

// Lookup finds a token in this member's applied table (auth.TokenLookup).
func (s *Service) Lookup(id string) (*logpb.TokenRecord, bool) { return s.leader.State().Token(id) }

// List is every token of st as the API shows it (never a secret or its
// hash).
func List(st *fsm.State) []*coordpb.TokenInfo {
	var out []*coordpb.TokenInfo
	for _, t := range st.Tokens() {
		out = append(out, info(t))
	}
	return out
}

func info(t *logpb.TokenRecord) *coordpb.TokenInfo {
	// A node record without a node ID predates per-node identity; it is
	// listed as what it grants (proxy).
	role, node := auth.FromTokenRecord(t)
	return &coordpb.TokenInfo{Id: t.Id, Name: t.Name, Role: role.String(),
		CreatedUnixMs: t.CreatedMs, Bootstrap: t.Bootstrap, NodeId: node}
}

// Logger is what BootstrapRoutine logs to.
type Logger interface {
	Info(string, ...any)
	Warn(string, ...any)
}

// BootstrapRoutine is a leader routine that installs tok as the cluster's
// admin bootstrap token once: it does nothing when a bootstrap token was
// ever installed (so a revoked one stays revoked), and retries a failed
// proposal until it succeeds or the term ends.
func BootstrapRoutine(leader Leader, tok auth.Token, logger Logger) func(ctx context.Context, term uint64, p commands.Proposer) {
	return func(ctx context.Context, term uint64, p commands.Proposer) {
		rec := &logpb.TokenRecord{Id: tok.ID, Name: "bootstrap", Role: logpb.TokenRole_TOKEN_ROLE_ADMIN,
			SecretSha256: tok.SecretHash(), Bootstrap: true}
		for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
			if leader.State().BootstrapTokenInstalled() {
				return
			}
			_, err := commands.CommitNew(ctx, p, &logpb.CreateToken{Token: rec}, "")
			var rej *commands.RejectedError
			switch {
			case err == nil:
				logger.Info("installed the bootstrap admin token", "token_id", tok.ID, "term", term)
				return
			case errors.As(err, &rej):
				logger.Warn("bootstrap token refused", "token_id", tok.ID, "reason", rej.Message)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}
}
