package auth

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
)

// A member not caught up answers an unknown token Unavailable marked
// "coordd-outcome: none" (nothing was done), so the client SDK retries it
// as a known outcome instead of taking it for a connection that broke
// under the call.
func TestNotCaughtUpIsMarkedNothingDone(t *testing.T) {
	a := New(func(string) (*logpb.TokenRecord, bool) { return nil, false }).
		WithCatchUp(func() (bool, string) { return true, "is replaying its log" })
	srv := grpc.NewServer(a.Interceptors()...)
	coordpb.RegisterClusterServer(srv, coordpb.UnimplementedClusterServer{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	tok, _ := NewToken()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok.String())
	var trailer metadata.MD
	_, err = coordpb.NewClusterClient(cc).Status(ctx, &coordpb.StatusRequest{}, grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v; want Unavailable", err)
	}
	if got := trailer.Get(mdOutcome); len(got) != 1 || got[0] != outcomeNone {
		t.Fatalf("trailer %s = %v; want [%s]", mdOutcome, got, outcomeNone)
	}
}
