package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// A token reads "cdt_<id>_<secret>": a fixed prefix (so scanners and
// humans recognise a leaked one), the public ID (16 hex digits, the key of
// the token table) and the secret (32 random bytes, unpadded base64url).
// The cluster stores only SHA-256(secret); it compares hashes in constant
// time.
const (
	tokenPrefix  = "cdt_"
	idLen        = 16
	secretBytes  = 32
	secretLen    = 43 // base64.RawURLEncoding of 32 bytes
	tokenLen     = len(tokenPrefix) + idLen + 1 + secretLen
	bearerScheme = "bearer"
)

// ErrMalformed marks a token or Authorization header that does not parse.
var ErrMalformed = errors.New("malformed credentials")

// Token is a parsed bearer token.
type Token struct {
	ID     string
	secret string
}

// String is the whole bearer token, secret included: handle with care.
func (t Token) String() string { return tokenPrefix + t.ID + "_" + t.secret }

// SecretHash is SHA-256 of the secret part, what the token table stores.
func (t Token) SecretHash() []byte {
	h := sha256.Sum256([]byte(t.secret))
	return h[:]
}

// NewToken draws a fresh token from crypto/rand.
func NewToken() (Token, error) {
	var id [idLen / 2]byte
	var secret [secretBytes]byte
	if _, err := rand.Read(id[:]); err != nil {
		return Token{}, fmt.Errorf("draw token id: %w", err)
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return Token{}, fmt.Errorf("draw token secret: %w", err)
	}
	return Token{ID: hex.EncodeToString(id[:]), secret: base64.RawURLEncoding.EncodeToString(secret[:])}, nil
}

// ParseToken parses "cdt_<16 hex>_<43 base64url>".
func ParseToken(s string) (Token, error) {
	if len(s) != tokenLen || !strings.HasPrefix(s, tokenPrefix) || s[len(tokenPrefix)+idLen] != '_' {
		return Token{}, fmt.Errorf("%w: a coordd token reads cdt_<16 hex digits>_<43 characters>", ErrMalformed)
	}
	id, secret := s[len(tokenPrefix):len(tokenPrefix)+idLen], s[len(tokenPrefix)+idLen+1:]
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Token{}, fmt.Errorf("%w: token ID must be lower-case hex", ErrMalformed)
		}
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
	if err != nil || len(raw) != secretBytes {
		return Token{}, fmt.Errorf("%w: token secret is not 32 bytes of base64url", ErrMalformed)
	}
	return Token{ID: id, secret: secret}, nil
}

// ParseAuthorization extracts the token from an Authorization value
// "Bearer <token>" (scheme case-insensitive, RFC 6750). An empty value is
// ErrMalformed too; callers check for absence first.
func ParseAuthorization(v string) (Token, error) {
	scheme, rest, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, bearerScheme) {
		return Token{}, fmt.Errorf("%w: want \"Bearer <token>\"", ErrMalformed)
	}
	return ParseToken(strings.TrimLeft(rest, " "))
}
