package grpcserver

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/coordd/coordd/api/auth"
	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// roleTokens creates one token per role directly in the FSM (the node token
// bound to node identity 1) and returns their bearer strings by role.
func roleTokens(t *testing.T, tn *testNode) map[auth.Role]string {
	t.Helper()
	out := map[auth.Role]string{}
	for _, r := range []auth.Role{auth.RoleRead, auth.RoleProxy, auth.RoleNode, auth.RoleAdmin} {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		var node uint64
		if r == auth.RoleNode {
			node = 1
		}
		res, err := commands.Propose(callCtx(t), tn.node, &logpb.CreateToken{Token: &logpb.TokenRecord{
			Id: tok.ID, Name: r.String(), Role: r.TokenRole(), SecretSha256: tok.SecretHash(), NodeId: node}}, "")
		if err != nil || res.Rejection != nil {
			t.Fatalf("create %s token: %v %v", r, res, err)
		}
		out[r] = tok.String()
	}
	return out
}

// registeredMethods lists every method the server registers, as
// "/service/Method", with its descriptor.
func registeredMethods(t *testing.T, g *grpc.Server) map[string]protoreflect.MethodDescriptor {
	t.Helper()
	out := map[string]protoreflect.MethodDescriptor{}
	for svc, info := range g.GetServiceInfo() {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
		if err != nil {
			t.Fatalf("service %s has no registered descriptor: %v", svc, err)
		}
		sd := d.(protoreflect.ServiceDescriptor)
		for _, m := range info.Methods {
			out["/"+svc+"/"+m.Name] = sd.Methods().ByName(protoreflect.Name(m.Name))
		}
	}
	return out
}

// callAs calls method with an empty request and the given bearer token
// ("" = no credentials) and returns the resulting status code.
func callAs(ctx context.Context, conn *grpc.ClientConn, method string, md protoreflect.MethodDescriptor, token string) codes.Code {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	req := dynamicpb.NewMessage(md.Input())
	resp := dynamicpb.NewMessage(md.Output())
	if !md.IsStreamingClient() && !md.IsStreamingServer() {
		return status.Code(conn.Invoke(ctx, method, req, resp))
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, method)
	if err != nil {
		return status.Code(err)
	}
	if err := s.SendMsg(req); err != nil && !errors.Is(err, io.EOF) {
		return status.Code(err)
	}
	_ = s.CloseSend()
	err = s.RecvMsg(resp)
	if errors.Is(err, io.EOF) {
		return codes.OK
	}
	return status.Code(err)
}

// TestEveryMethodHasARow: every method registered on the gRPC server has a
// row in auth's method table (or its standard service has one), and every
// row names a registered method. A new RPC without a row fails here.
func TestEveryMethodHasARow(t *testing.T) {
	tn := startTestNodeWith(t, WithAuth())
	methods := registeredMethods(t, tn.grpc)
	for m := range methods {
		if _, known := auth.MethodRole(m); !known {
			t.Errorf("gRPC method %s has no row in api/auth's method table (it defaults to admin)", m)
		}
	}
	for m := range auth.MethodTable() {
		if _, ok := methods[m]; !ok {
			t.Errorf("method table row %s names no registered method", m)
		}
	}
	if len(methods) < 50 {
		t.Fatalf("only %d methods registered; the walk is not seeing the services", len(methods))
	}
}

// TestEveryMethodEveryRole walks every registered method with every role
// (none, read, proxy, node, admin): a caller without credentials gets
// Unauthenticated, one whose role is below the method's PermissionDenied,
// and every refused call changes nothing (the applied index stays put).
// Callers with enough rights get past authorisation (their empty requests
// may still be invalid).
func TestEveryMethodEveryRole(t *testing.T) {
	tn := startTestNodeWith(t, WithAuth())
	tokens := roleTokens(t, tn)
	methods := registeredMethods(t, tn.grpc)
	names := make([]string, 0, len(methods))
	for m := range methods {
		names = append(names, m)
	}
	sort.Strings(names)
	roles := []auth.Role{auth.RoleNone, auth.RoleRead, auth.RoleProxy, auth.RoleNode, auth.RoleAdmin}
	ctx := callCtx(t)

	// Refusals first, all of them, then check nothing was applied.
	before := tn.node.State().AppliedIndex()
	denied := 0
	for _, m := range names {
		need, _ := auth.MethodRole(m)
		for _, r := range roles {
			if r.Includes(need) {
				continue
			}
			want := codes.PermissionDenied
			if r == auth.RoleNone {
				want = codes.Unauthenticated
			}
			if got := callAs(ctx, tn.conn, m, methods[m], tokens[r]); got != want {
				t.Errorf("%s as %s: %v, want %v", m, r, got, want)
			}
			denied++
		}
	}
	if after := tn.node.State().AppliedIndex(); after != before {
		t.Errorf("refused calls moved the applied index from %d to %d", before, after)
	}
	// Then the calls that must get through authorisation.
	for _, m := range names {
		need, _ := auth.MethodRole(m)
		for _, r := range roles {
			if !r.Includes(need) {
				continue
			}
			if got := callAs(ctx, tn.conn, m, methods[m], tokens[r]); got == codes.Unauthenticated || got == codes.PermissionDenied {
				t.Errorf("%s as %s: %v, want it past authorisation", m, r, got)
			}
		}
	}
	t.Logf("%d methods, %d refusals checked", len(names), denied)
}

// wrongSecret returns tok with its secret changed in one character and
// still well-formed. The last character of the secret carries padding bits
// that strict base64 requires zero, so the one before it is changed, to a
// character it is not: replacing a fixed suffix would leave the token
// unchanged whenever it already ended that way (1 in 1,024 tokens).
func wrongSecret(tok string) string {
	i := len(tok) - 2
	c := byte('A')
	if tok[i] == c {
		c = 'B'
	}
	return tok[:i] + string(c) + tok[i+1:]
}

// TestBadCredentials: malformed, unknown and revoked tokens are all
// Unauthenticated; a revoked token stops working at once.
func TestBadCredentials(t *testing.T) {
	tn := startTestNodeWith(t, WithAuth())
	tokens := roleTokens(t, tn)
	ctx := callCtx(t)
	status := func(authz string) codes.Code {
		c := ctx
		if authz != "" {
			c = metadata.AppendToOutgoingContext(ctx, "authorization", authz)
		}
		_, err := tn.cluster.Status(c, &coordpb.StatusRequest{})
		return statusCode(err)
	}
	unknown, _ := auth.NewToken()
	for name, authz := range map[string]string{
		"basic scheme":  "Basic dXNlcjpwYXNz",
		"garbage":       "Bearer not-a-token",
		"unknown token": "Bearer " + unknown.String(),
		"wrong secret":  "Bearer " + wrongSecret(tokens[auth.RoleRead]),
	} {
		if got := status(authz); got != codes.Unauthenticated {
			t.Errorf("%s: %v, want Unauthenticated", name, got)
		}
	}
	if got := status("Bearer " + tokens[auth.RoleRead]); got != codes.OK {
		t.Fatalf("read token: %v", got)
	}
	admin := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tokens[auth.RoleAdmin])
	tc := coordpb.NewTokensClient(tn.conn)
	list, err := tc.ListTokens(admin, &coordpb.ListTokensRequest{})
	if err != nil || len(list.Tokens) != 4 {
		t.Fatalf("list: %v %v", list, err)
	}
	readID := strings.Split(tokens[auth.RoleRead], "_")[1]
	if _, err := tc.RevokeToken(admin, &coordpb.RevokeTokenRequest{Id: readID}); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if got := status("Bearer " + tokens[auth.RoleRead]); got != codes.Unauthenticated {
		t.Errorf("revoked token: %v, want Unauthenticated", got)
	}
	// A created token works with its role and no more.
	created, err := tc.CreateToken(admin, &coordpb.CreateTokenRequest{Role: "proxy", Name: "proxy-1"})
	if err != nil || created.Token.Role != "proxy" || !strings.HasPrefix(created.Secret, "cdt_"+created.Token.Id+"_") {
		t.Fatalf("create: %v %v", created, err)
	}
	proxy := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+created.Secret)
	if _, err := tn.alloc.AllocID(proxy, &coordpb.AllocIDRequest{Count: 1}); err != nil {
		t.Errorf("proxy token AllocID: %v", err)
	}
	if _, err := tc.ListTokens(proxy, &coordpb.ListTokensRequest{}); statusCode(err) != codes.PermissionDenied {
		t.Errorf("proxy token ListTokens: %v, want PermissionDenied", err)
	}
	for _, bad := range []*coordpb.CreateTokenRequest{
		{Role: "root"},
		{Role: "node", Name: "unbound"},           // a node token names its node
		{Role: "proxy", Name: "bound", NodeId: 2}, // only node tokens are bound
	} {
		if _, err := tc.CreateToken(admin, bad); statusCode(err) != codes.InvalidArgument {
			t.Errorf("create %v: %v, want InvalidArgument", bad, err)
		}
	}
	bound, err := tc.CreateToken(admin, &coordpb.CreateTokenRequest{Role: "node", Name: "sn2", NodeId: 2})
	if err != nil || bound.Token.Role != "node" || bound.Token.NodeId != 2 {
		t.Fatalf("create node token: %v %v", bound, err)
	}
}

func statusCode(err error) codes.Code { return status.Code(err) }

// TestWrongSecretIsWellFormedAndWrong: whatever a token's last characters,
// wrongSecret parses and differs from it (the "wrong secret" case of
// TestBadCredentials once passed with a token that already ended in "AA").
func TestWrongSecretIsWellFormedAndWrong(t *testing.T) {
	for i := 0; i < 2000; i++ {
		tok, err := auth.NewToken()
		if err != nil {
			t.Fatal(err)
		}
		s := tok.String()
		if i == 0 { // the case that used to pass: a secret ending in "AA"
			s = s[:len(s)-2] + "AA"
		}
		w := wrongSecret(s)
		if w == s {
			t.Fatalf("wrongSecret(%s) left it unchanged", s)
		}
		if _, err := auth.ParseToken(w); err != nil {
			t.Fatalf("wrongSecret(%s) = %s: %v", s, w, err)
		}
	}
}
