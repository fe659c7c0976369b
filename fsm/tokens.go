package fsm

import (
	"fmt"

	"github.com/benbjohnson/immutable"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// tokensState is the access-control table (docs/security.md): API tokens by
// ID, each with only the SHA-256 of its secret, and whether the cluster's
// bootstrap token was ever installed. Invariant: every record is stored
// under its own ID and passes commands.ValidateTokenRecord; at most
// commands.MaxTokens records.
type tokensState struct {
	byID         *immutable.SortedMap[string, *logpb.TokenRecord]
	bootstrapped bool
}

func newTokensState() tokensState {
	return tokensState{byID: immutable.NewSortedMap[string, *logpb.TokenRecord](nil)}
}

// Token looks up one token by ID. The record is shared and must not be
// modified.
func (s *State) Token(id string) (*logpb.TokenRecord, bool) { return s.tok.byID.Get(id) }

// Tokens returns every token, sorted by ID (records shared, read-only).
func (s *State) Tokens() []*logpb.TokenRecord {
	out := make([]*logpb.TokenRecord, 0, s.tok.byID.Len())
	for it := s.tok.byID.Iterator(); !it.Done(); {
		_, t, _ := it.Next()
		out = append(out, t)
	}
	return out
}

// BootstrapTokenInstalled reports whether a bootstrap token was ever
// installed (it stays true after that token is revoked).
func (s *State) BootstrapTokenInstalled() bool { return s.tok.bootstrapped }

// applyCreateToken adds a token. Refused: an ID in use (CONFLICT), a second
// bootstrap token (CONFLICT: a revoked bootstrap token must stay revoked),
// a full table (EXHAUSTED). The creation time is the leader's stamp.
func applyCreateToken(next *State, c commands.Command) *logpb.Result {
	t := c.Body.(*logpb.CreateToken).Token
	if _, dup := next.tok.byID.Get(t.Id); dup {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "token %s already exists", t.Id)
	}
	if c.Version >= 2 && t.Role == logpb.TokenRole_TOKEN_ROLE_NODE && t.NodeId == 0 {
		// Unbound node tokens exist only from v1 entries (they grant the
		// proxy's rights); from v2 on a node token names its node.
		return reject(logpb.RejectCode_REJECT_INVALID, "a node token must be bound to a node identity (node_id)")
	}
	if t.Bootstrap && next.tok.bootstrapped {
		return reject(logpb.RejectCode_REJECT_CONFLICT, "a bootstrap token was already installed in this cluster")
	}
	if next.tok.byID.Len() >= commands.MaxTokens {
		return reject(logpb.RejectCode_REJECT_EXHAUSTED, "the cluster already has %d tokens (max %d); revoke some first",
			next.tok.byID.Len(), commands.MaxTokens)
	}
	rec := &logpb.TokenRecord{Id: t.Id, Name: t.Name, Role: t.Role, SecretSha256: append([]byte(nil), t.SecretSha256...),
		CreatedMs: c.ProposedAtUnixMs, Bootstrap: t.Bootstrap, NodeId: t.NodeId}
	next.tok.byID = next.tok.byID.Set(rec.Id, rec)
	if rec.Bootstrap {
		next.tok.bootstrapped = true
	}
	return accepted()
}

// applyRevokeToken deletes a token; an unknown ID is NOT_FOUND.
func applyRevokeToken(next *State, c commands.Command) *logpb.Result {
	id := c.Body.(*logpb.RevokeToken).Id
	if _, ok := next.tok.byID.Get(id); !ok {
		return reject(logpb.RejectCode_REJECT_NOT_FOUND, "token %s does not exist", id)
	}
	next.tok.byID = next.tok.byID.Delete(id)
	return accepted()
}

// tokenRecordCount is the number of snapshot records writeTokenRecords
// writes: the meta record only once a bootstrap token was installed, so a
// state that never used tokens snapshots to the same bytes as before.
func (s *State) tokenRecordCount() uint64 {
	n := uint64(s.tok.byID.Len())
	if s.tok.bootstrapped {
		n++
	}
	return n
}

func (s *State) writeTokenRecords(write func(*logpb.SnapshotRecord) error) error {
	if s.tok.bootstrapped {
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_SecurityMeta{
			SecurityMeta: &logpb.SecurityMeta{BootstrapTokenInstalled: true}}}); err != nil {
			return err
		}
	}
	for it := s.tok.byID.Iterator(); !it.Done(); {
		_, t, _ := it.Next()
		if err := write(&logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Token{Token: t}}); err != nil {
			return err
		}
	}
	return nil
}

// readTokenRecord installs one snapshot record; ok=false means rec is not
// an access-control record.
func (s *State) readTokenRecord(rec *logpb.SnapshotRecord) (ok bool) {
	switch v := rec.Record.(type) {
	case *logpb.SnapshotRecord_Token:
		s.tok.byID = s.tok.byID.Set(v.Token.Id, v.Token)
	case *logpb.SnapshotRecord_SecurityMeta:
		s.tok.bootstrapped = v.SecurityMeta.BootstrapTokenInstalled
	default:
		return false
	}
	return true
}

func (s *State) checkTokenInvariants() error {
	if n := s.tok.byID.Len(); n > commands.MaxTokens {
		return fmt.Errorf("token table holds %d tokens (max %d)", n, commands.MaxTokens)
	}
	for it := s.tok.byID.Iterator(); !it.Done(); {
		id, t, _ := it.Next()
		if t.GetId() != id {
			return fmt.Errorf("token record under key %q has id %q", id, t.GetId())
		}
		if err := commands.ValidateTokenRecord(t); err != nil {
			return fmt.Errorf("token %s: %v", id, err)
		}
	}
	return nil
}
