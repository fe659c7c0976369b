package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
)

var tokenGroup = &group{
	name:    "token",
	summary: "manage API tokens (admin role; docs/security.md)",
	cmds: []*command{
		{name: "create", args: "ROLE", summary: "create a token with role read, proxy, node (with --node-id) or admin and print its secret (shown once)", bind: bindTokenCreate},
		{name: "list", summary: "list tokens: ID, role, name, creation time (never secrets)", bind: bindTokenList},
		{name: "revoke", args: "ID", summary: "revoke a token: calls with it fail from then on", bind: bindTokenRevoke},
	},
}

type tokenJSON struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Role      string `json:"role"`
	CreatedMs int64  `json:"created_unix_ms"`
	Bootstrap bool   `json:"bootstrap,omitempty"`
	NodeID    uint64 `json:"node_id,omitempty"`
	Secret    string `json:"secret,omitempty"`
}

func bindTokenCreate(fs *flag.FlagSet) func([]string) (action, error) {
	name := fs.String("name", "", "label: who holds the token and what for")
	nodeID := fs.Uint64("node-id", 0, "for role node (required): the streaming node identity the token is bound to; it may speak only for that node")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "ROLE"); err != nil {
			return action{}, err
		}
		r, err := auth.ParseRole(args[0])
		if err != nil {
			return action{}, err
		}
		switch {
		case r == auth.RoleNode && *nodeID == 0:
			return action{}, fmt.Errorf("a node token is bound to one streaming node: add --node-id N (proxies use role proxy)")
		case r != auth.RoleNode && *nodeID != 0:
			return action{}, fmt.Errorf("--node-id is only for role node")
		}
		if len(*name) > commands.MaxTokenNameBytes {
			return action{}, fmt.Errorf("--name is longer than %d bytes", commands.MaxTokenNameBytes)
		}
		role, node := args[0], *nodeID
		return action{what: "token create", mutates: true, run: func(ctx context.Context, e *env) error {
			var resp *coordpb.CreateTokenResponse
			var err error
			if node != 0 {
				resp, err = e.c.CreateNodeToken(ctx, node, *name)
			} else {
				resp, err = e.c.CreateToken(ctx, role, *name)
			}
			if err != nil {
				return err
			}
			t := resp.GetToken()
			return e.show(tokenJSON{ID: t.GetId(), Name: t.GetName(), Role: t.GetRole(), CreatedMs: t.GetCreatedUnixMs(),
				NodeID: t.GetNodeId(), Secret: resp.GetSecret()}, func(w io.Writer) error {
				bound := ""
				if t.GetNodeId() != 0 {
					bound = fmt.Sprintf(", bound to node %d", t.GetNodeId())
				}
				fmt.Fprintf(w, "Token %s (role %s%s) created. Its secret is shown only now:\n%s\n", t.GetId(), t.GetRole(), bound, resp.GetSecret())
				return nil
			})
		}}, nil
	}
}

func bindTokenList(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		return action{what: "token list", run: func(ctx context.Context, e *env) error {
			ts, err := e.c.ListTokens(ctx)
			if err != nil {
				return err
			}
			out := []tokenJSON{}
			for _, t := range ts {
				out = append(out, tokenJSON{ID: t.GetId(), Name: t.GetName(), Role: t.GetRole(), CreatedMs: t.GetCreatedUnixMs(),
					Bootstrap: t.GetBootstrap(), NodeID: t.GetNodeId()})
			}
			return e.show(out, func(w io.Writer) error {
				tw := newTable(w)
				fmt.Fprintln(tw, "ID\tROLE\tNODE\tNAME\tCREATED\tBOOTSTRAP")
				for _, t := range ts {
					node := "-"
					if t.GetNodeId() != 0 {
						node = fmt.Sprint(t.GetNodeId())
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", t.GetId(), t.GetRole(), node, dash(t.GetName()),
						time.UnixMilli(t.GetCreatedUnixMs()).UTC().Format(time.RFC3339), t.GetBootstrap())
				}
				return tw.Flush()
			})
		}}, nil
	}
}

func bindTokenRevoke(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "ID"); err != nil {
			return action{}, err
		}
		if err := commands.ValidateTokenID(args[0]); err != nil {
			return action{}, trimInvalid(err)
		}
		id := args[0]
		return action{what: "token revoke", mutates: true, run: func(ctx context.Context, e *env) error {
			if err := e.c.RevokeToken(ctx, id); err != nil {
				return err
			}
			fmt.Fprintf(e.out, "Token %s revoked.\n", id)
			return nil
		}}, nil
	}
}
