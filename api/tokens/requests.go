package tokens

import (
	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// The checked requests. Each holds the command its use case proposes,
// built (and so validated) by commands.New; a constructor's error about
// the request matches commands.ErrInvalid. The zero value of a request is
// not valid.

// Create is a CreateToken request with the token drawn for it.
type Create struct {
	cmd commands.Command
	tok auth.Token
}

// NewCreate checks a CreateToken request (a known role; a node ID exactly
// for role node) and draws its token: the command holds the secret's hash,
// the request the token itself, which the answer shows once.
func NewCreate(req *coordpb.CreateTokenRequest) (Create, error) {
	role, err := auth.ParseRole(req.Role)
	if err != nil {
		return Create{}, vocab.Errorf(commands.ErrInvalid, "%v", err)
	}
	switch {
	case role == auth.RoleNode && req.NodeId == 0:
		return Create{}, vocab.Errorf(commands.ErrInvalid, "a node token is bound to one streaming node: give node_id (coordctl token create node --node-id N); proxies use role proxy")
	case role != auth.RoleNode && req.NodeId != 0:
		return Create{}, vocab.Errorf(commands.ErrInvalid, "node_id is only for role node, not %s", role)
	}
	tok, err := auth.NewToken()
	if err != nil {
		return Create{}, err
	}
	rec := &logpb.TokenRecord{Id: tok.ID, Name: req.Name, Role: role.TokenRole(), SecretSha256: tok.SecretHash(), NodeId: req.NodeId}
	cmd, err := commands.New(&logpb.CreateToken{Token: rec}, "")
	if err != nil {
		return Create{}, err
	}
	return Create{cmd: cmd, tok: tok}, nil
}

// Revoke is a RevokeToken request.
type Revoke struct{ cmd commands.Command }

// NewRevoke checks a RevokeToken request.
func NewRevoke(req *coordpb.RevokeTokenRequest) (Revoke, error) {
	cmd, err := commands.New(&logpb.RevokeToken{Id: req.Id}, "")
	return Revoke{cmd}, err
}
