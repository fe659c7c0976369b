package broadcaster

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

type fakeNodeService struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	mu        sync.Mutex
	reqs      []*coordpb.AppendRequest
	coordTerm []string
	fail      error
}

func (s *fakeNodeService) Append(ctx context.Context, req *coordpb.AppendRequest) (*coordpb.AppendResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	s.coordTerm = append(s.coordTerm, md.Get(MDCoordTerm)...)
	if s.fail != nil {
		return nil, s.fail
	}
	return &coordpb.AppendResponse{Id: &coordpb.MessageID{Term: 3, Offset: 41}, Timestamp: 4242, Duplicate: len(s.reqs) > 1}, nil
}

func TestGRPCAppender(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &fakeNodeService{}
	g := grpc.NewServer()
	coordpb.RegisterStreamingNodeServiceServer(g, svc)
	go g.Serve(lis)
	defer g.Stop()

	a := NewGRPCAppender(nil)
	var _ Appender = a
	addr := NodeTarget{Addr: lis.Addr().String(), ID: 4, Epoch: 77}
	for i := 0; i < 2; i++ { // the second is a (deduplicated) retry
		cp, err := a.Append(context.Background(), addr, "p_0_5v0", 3, []byte("x"), 17, true, 9)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if cp.Vchannel != "p_0_5v0" || cp.Term != 3 || cp.Offset != 41 || cp.TimeTick != 4242 {
			t.Fatalf("checkpoint %v", cp)
		}
	}
	svc.mu.Lock()
	req := svc.reqs[0]
	if req.Vchannel != "p_0_5v0" || req.Term != 3 || string(req.Payload) != "x" || req.BroadcastId != 17 || !req.AckSyncUp ||
		req.NodeId != 4 || req.Epoch != 77 || req.CoordTerm != 9 {
		t.Fatalf("request %v", req)
	}
	if len(svc.coordTerm) != 2 || svc.coordTerm[0] != "9" {
		t.Fatalf("coord term metadata %v", svc.coordTerm)
	}
	svc.fail = status.Error(codes.InvalidArgument, "payload too big")
	svc.mu.Unlock()
	_, err = a.Append(context.Background(), addr, "p_0_5v0", 3, nil, 17, false, 9)
	if code, ok := unrecoverableCode(err); !ok || code != "InvalidArgument" {
		t.Fatalf("err %v: unrecoverable %q %v", err, code, ok)
	}
	svc.mu.Lock()
	svc.fail = status.Error(codes.FailedPrecondition, "not the owner")
	svc.mu.Unlock()
	_, err = a.Append(context.Background(), addr, "p_0_5v0", 3, nil, 17, false, 9)
	if _, ok := unrecoverableCode(err); ok || !ownershipError(err) {
		t.Fatalf("not-owner error %v should be retryable and about ownership", err)
	}
	a.Close()
	if _, err := a.Append(context.Background(), addr, "p_0_5v0", 3, nil, 17, false, 9); !errors.Is(err, errAppenderClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
