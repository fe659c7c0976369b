package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/testutil"
)

// TestJoinTransferRemove: a fourth process joins through a follower's gRPC
// address, becomes a voter with its addresses recorded, leadership moves on
// request, and the member is removed again.
func TestJoinTransferRemove(t *testing.T) {
	l := startCluster(t)
	c := dialAll(t, l)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	leader := leaderIndex(t, l, c, -1)
	follower := (leader + 1) % 3
	base := freeBasePort(t, 1)
	dir := t.TempDir()
	n4 := struct{ raft, grpc, http string }{
		fmt.Sprintf("127.0.0.1:%d", base+100), fmt.Sprintf("127.0.0.1:%d", base), fmt.Sprintf("127.0.0.1:%d", base+1000)}
	startProcess(t, "n4", coorddBinary, append([]string{"serve", "--id", "n4", "--data-dir", filepath.Join(dir, "n4"),
		"--raft-addr", n4.raft, "--grpc-addr", n4.grpc, "--http-addr", n4.http,
		"--join", l.Members()[follower].GRPCAddr}, memberArgsSec(l, 3)...)...)

	// n4 appears as a voter with all three addresses.
	waitFor(t, ctx, "n4 to join as a voter with addresses", func() bool {
		r, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.MembersResponse, error) {
			return coordpb.NewClusterClient(conn).Members(ctx, &coordpb.MembersRequest{})
		})
		if err != nil {
			return false
		}
		for _, m := range r.Members {
			if m.Id == "n4" {
				return m.Suffrage == "voter" && m.RaftAddr == n4.raft && m.GrpcAddr == n4.grpc && m.HttpAddr == n4.http
			}
		}
		return false
	})

	// Transfer leadership to a named follower. The follower is chosen just
	// before the call: an election on a loaded machine may have moved
	// leadership since the join, and a transfer to the member that already
	// leads is refused (FailedPrecondition) by design.
	var target string
	want := -1
	for attempt := 1; want < 0; attempt++ {
		want = (leaderIndex(t, l, c, -1) + 1) % 3
		target = l.Members()[want].ID
		_, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.TransferLeaderResponse, error) {
			return coordpb.NewClusterClient(conn).TransferLeader(ctx, &coordpb.TransferLeaderRequest{TargetId: target})
		})
		if status.Code(err) == codes.FailedPrecondition && strings.Contains(err.Error(), "already leads") && attempt < 3 {
			want = -1
			continue
		}
		if err != nil {
			t.Fatalf("transfer leadership to %s: %v", target, err)
		}
	}
	if got := leaderIndex(t, l, c, -1); got != want {
		t.Fatalf("leader after transfer is %s, want %s", l.Members()[got].ID, target)
	}

	// Removing an unknown member is NotFound and changes nothing.
	_, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.RemoveMemberResponse, error) {
		return coordpb.NewClusterClient(conn).RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: "nope"})
	})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("remove unknown member: got %v, want NotFound", err)
	}

	// Remove n4; the configuration is back to three voters.
	r, err := anyMember(ctx, c, func(ctx context.Context, conn *grpc.ClientConn) (*coordpb.RemoveMemberResponse, error) {
		return coordpb.NewClusterClient(conn).RemoveMember(ctx, &coordpb.RemoveMemberRequest{Id: "n4"})
	})
	if err != nil {
		t.Fatalf("remove n4: %v", err)
	}
	if len(r.Members) != 3 {
		t.Fatalf("after removing n4: %d members, want 3: %v", len(r.Members), r.Members)
	}
	for _, m := range r.Members {
		if m.Id == "n4" {
			t.Fatal("n4 still listed after removal")
		}
	}
}

// waitFor polls cond (every 50 ms: each check is an RPC to another
// process) until it holds, failing the test when ctx's deadline (scaled
// by testutil's multiplier) passes first.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	wait := testutil.DefaultWait
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	testutil.EventuallyEvery(t, wait, 50*time.Millisecond, what, cond)
}
