package commands

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

func TestValidateTokenCommands(t *testing.T) {
	good := func() *logpb.TokenRecord {
		return &logpb.TokenRecord{Id: "0123456789abcdef", Name: "ops", Role: logpb.TokenRole_TOKEN_ROLE_ADMIN, SecretSha256: make([]byte, 32)}
	}
	for _, tc := range []struct {
		name string
		body any
		want string // "" = valid
	}{
		{"valid create", &logpb.CreateToken{Token: good()}, ""},
		{"missing token", &logpb.CreateToken{}, "token is missing"},
		{"short id", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Id = "abc"; return r }()}, "16 lower-case hex"},
		{"upper-case id", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Id = "0123456789ABCDEF"; return r }()}, "16 lower-case hex"},
		{"no role", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Role = 0; return r }()}, "role"},
		{"unknown role", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Role = 9; return r }()}, "role"},
		{"short hash", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.SecretSha256 = r.SecretSha256[:31]; return r }()}, "32 bytes"},
		{"long name", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Name = strings.Repeat("x", 129); return r }()}, "at most"},
		{"control char", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Name = "a\nb"; return r }()}, "control"},
		{"proxy role", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.Role = logpb.TokenRole_TOKEN_ROLE_PROXY; return r }()}, ""},
		{"bound node", &logpb.CreateToken{Token: func() *logpb.TokenRecord {
			r := good()
			r.Role, r.NodeId = logpb.TokenRole_TOKEN_ROLE_NODE, 3
			return r
		}()}, ""},
		{"bound admin", &logpb.CreateToken{Token: func() *logpb.TokenRecord { r := good(); r.NodeId = 3; return r }()}, "only a node token"},
		{"bound proxy", &logpb.CreateToken{Token: func() *logpb.TokenRecord {
			r := good()
			r.Role, r.NodeId = logpb.TokenRole_TOKEN_ROLE_PROXY, 3
			return r
		}()}, "only a node token"},
		{"valid revoke", &logpb.RevokeToken{Id: "fedcba9876543210"}, ""},
		{"bad revoke", &logpb.RevokeToken{Id: "zz"}, "16 lower-case hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, ok := validateTokenCommand(tc.body)
			if !ok {
				t.Fatal("not recognised as a token command")
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want invalid containing %q, got %v", tc.want, err)
			}
		})
	}
}
