package tokens

import (
	"context"
	"errors"
	"testing"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/controller/controllertest"
)

// NewCreate refuses a role it does not know and a node ID given to the
// wrong role or missing from role node, before anything is drawn.
func TestNewCreateChecksTheRole(t *testing.T) {
	for name, req := range map[string]*coordpb.CreateTokenRequest{
		"unknown role":        {Name: "x", Role: "root"},
		"node without a node": {Name: "x", Role: "node"},
		"proxy with a node":   {Name: "x", Role: "proxy", NodeId: 3},
	} {
		if _, err := NewCreate(req); !errors.Is(err, commands.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
}

// Create commits the token and answers with the stored record and the
// secret; the token then authenticates through Lookup, and Revoke
// removes it. Requests no constructor made are refused unproposed.
func TestCreateLookupRevoke(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 3)
	s := New(l)
	ctx := context.Background()
	c, err := NewCreate(&coordpb.CreateTokenRequest{Name: "n7", Role: "node", NodeId: 7})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Create(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Token.Role != "node" || resp.Token.NodeId != 7 || resp.Token.Name != "n7" || resp.Secret == "" {
		t.Fatalf("Create = %v", resp)
	}
	tok, err := auth.ParseToken(resp.Secret)
	if err != nil {
		t.Fatal(err)
	}
	who, err := auth.New(s.Lookup).Authenticate(auth.Credentials{Authorization: "Bearer " + resp.Secret})
	if err != nil || who.Role != auth.RoleNode || who.Node != 7 {
		t.Fatalf("Authenticate = %+v, %v; want node 7", who, err)
	}
	if got := List(l.State()); len(got) != 1 || got[0].Id != tok.ID {
		t.Errorf("List = %v; want the new token", got)
	}
	r, err := NewRevoke(&coordpb.RevokeTokenRequest{Id: tok.ID})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(ctx, r); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Lookup(tok.ID); ok {
		t.Error("a revoked token is still found")
	}
	before := len(l.Applied())
	if _, err := s.Create(ctx, Create{}); !errors.Is(err, commands.ErrInvalid) {
		t.Errorf("Create of a zero request: %v; want ErrInvalid", err)
	}
	if err := s.Revoke(ctx, Revoke{}); !errors.Is(err, commands.ErrInvalid) {
		t.Errorf("Revoke of a zero request: %v; want ErrInvalid", err)
	}
	if after := len(l.Applied()); after != before {
		t.Errorf("%d commands applied; want none", after-before)
	}
}
