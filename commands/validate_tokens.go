package commands

import (
	"unicode/utf8"

	"github.com/coordd/coordd/commands/logpb"
)

// Shape limits for access-control commands.
const (
	// TokenIDLen is the length of a token ID: 16 lower-case hex digits
	// (64 random bits; the ID is public, the secret is separate).
	TokenIDLen = 16
	// MaxTokenNameBytes bounds a token's label.
	MaxTokenNameBytes = 128
	// MaxTokens bounds the token table (the FSM refuses more).
	MaxTokens = 1024
)

// validateTokenCommand covers the 0x0500 block; ok=false means body is not
// an access-control command.
func validateTokenCommand(body any) (err error, ok bool) {
	switch b := body.(type) {
	case *logpb.CreateToken:
		return ValidateTokenRecord(b.Token), true
	case *logpb.RevokeToken:
		return ValidateTokenID(b.Id), true
	}
	return nil, false
}

// ValidateTokenRecord checks a token's shape: ID, role, label and a 32-byte
// secret hash.
func ValidateTokenRecord(t *logpb.TokenRecord) error {
	if t == nil {
		return invalid("token is missing")
	}
	if err := ValidateTokenID(t.Id); err != nil {
		return err
	}
	if t.Role < logpb.TokenRole_TOKEN_ROLE_READ || t.Role > logpb.TokenRole_TOKEN_ROLE_PROXY {
		return invalid("token role must be read, proxy, node or admin, got %v", t.Role)
	}
	// A NODE record may lack node_id only when it predates per-node
	// identity (it then has the proxy's rights); no other role is bound.
	if t.NodeId != 0 && t.Role != logpb.TokenRole_TOKEN_ROLE_NODE {
		return invalid("only a node token is bound to a node ID, not a %v token", t.Role)
	}
	if len(t.SecretSha256) != 32 {
		return invalid("token secret hash must be 32 bytes (SHA-256), got %d", len(t.SecretSha256))
	}
	if len(t.Name) > MaxTokenNameBytes || !utf8.ValidString(t.Name) {
		return invalid("token name must be valid UTF-8 of at most %d bytes", MaxTokenNameBytes)
	}
	for _, r := range t.Name {
		if r < 0x20 || r == 0x7f {
			return invalid("token name must not contain control characters")
		}
	}
	return nil
}

// ValidateTokenID checks a token ID: exactly TokenIDLen lower-case hex digits.
func ValidateTokenID(id string) error {
	if len(id) != TokenIDLen {
		return invalid("token ID must be %d lower-case hex digits, got %q", TokenIDLen, id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return invalid("token ID must be %d lower-case hex digits, got %q", TokenIDLen, id)
		}
	}
	return nil
}
