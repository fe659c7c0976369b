package grpcserver

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/controller/membership"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
)

// Status answers from this node's own view; it never forwards, so an
// operator can ask every member what it sees. The response's Members are
// shared with other responses (statusMembers) and must not be modified.
func (s *Server) Status(ctx context.Context, _ *coordpb.StatusRequest) (*coordpb.StatusResponse, error) {
	r := s.node.Raft()
	st := s.node.State()
	leaderID, leaderGRPC := s.leaderHintIn(st)
	servers, err := s.node.Configuration()
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.StatusResponse{
		NodeId:            s.self.ID,
		State:             r.State().String(),
		LeaderId:          leaderID,
		LeaderGrpcAddr:    leaderGRPC,
		Term:              r.CurrentTerm(),
		CommitIndex:       r.CommitIndex(),
		AppliedIndex:      r.AppliedIndex(),
		LastLogIndex:      r.LastIndex(),
		EstablishedTerm:   st.EstablishedTerm(),
		Members:           s.statusMembers.get(servers, leaderID, st),
		LastSnapshotIndex: s.node.LastSnapshotIndex(),
	}, nil
}

// members joins raft's configuration (who is a member, with what suffrage)
// with st's address directory.
func (s *Server) members(st *fsm.State) ([]*coordpb.Member, error) {
	list, err := s.membership.List(st)
	return apiMembers(list), err
}

func apiMembers(list []membership.Member) []*coordpb.Member {
	out := make([]*coordpb.Member, 0, len(list))
	for _, m := range list {
		suffrage := "nonvoter"
		if m.Voter {
			suffrage = "voter"
		}
		out = append(out, &coordpb.Member{Id: m.ID, RaftAddr: m.RaftAddr, Suffrage: suffrage, Leader: m.Leader,
			GrpcAddr: m.GrpcAddr, HttpAddr: m.HTTPAddr})
	}
	return out
}

// Members returns every raft member with its suffrage and addresses.
// Linearizable (forwarded to the leader) when the request asks for it;
// otherwise this node's view.
func (s *Server) Members(ctx context.Context, req *coordpb.MembersRequest) (*coordpb.MembersResponse, error) {
	if err := checkConsistency(req.Consistency); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	st := s.node.State()
	if req.Consistency == coordpb.ReadConsistency_LINEARIZABLE {
		if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.MembersResponse, error) {
			return coordpb.NewClusterClient(c).Members(ctx, req, o...)
		}); handled {
			return resp, err
		}
		var err error
		if st, err = s.node.LinearizableRead(ctx); err != nil {
			return nil, s.toStatus(ctx, err)
		}
	}
	members, err := s.members(st)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.MembersResponse{Members: members}, nil
}

// AddVoter records a new member's addresses, then adds it to raft as a
// voter, and returns the members. FailedPrecondition when another member
// uses the raft address (membership.Service.AddVoter decides). Membership
// changes are not idempotent: after an outcome-unknown answer, check
// Members before retrying.
func (s *Server) AddVoter(ctx context.Context, req *coordpb.AddVoterRequest) (*coordpb.AddVoterResponse, error) {
	j, err := membership.NewJoin(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AddVoterResponse, error) {
		return coordpb.NewClusterClient(c).AddVoter(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.membership.AddVoter(ctx, j); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	members, err := s.membership.Members()
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.AddVoterResponse{Members: apiMembers(members), ClusterId: s.node.ClusterID()}, nil
}

// RemoveMember removes a member from raft and forgets its addresses, and
// returns the members. NotFound for an unknown member. A leader asked to
// remove itself hands leadership over first and answers Unavailable with
// the new leader's hint, so the caller retries there.
func (s *Server) RemoveMember(ctx context.Context, req *coordpb.RemoveMemberRequest) (*coordpb.RemoveMemberResponse, error) {
	r, err := membership.NewRemoval(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RemoveMemberResponse, error) {
		return coordpb.NewClusterClient(c).RemoveMember(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.membership.RemoveMember(ctx, r); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	members, err := s.membership.Members()
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.RemoveMemberResponse{Members: apiMembers(members)}, nil
}

// transferWait bounds how long TransferLeader waits to hear from the new
// leader.
const transferWait = 2 * time.Second

// TransferLeader hands leadership to the named voter (any voter when
// target_id is empty) and waits briefly for the new leader to be heard
// from. NotFound for an unknown member, FailedPrecondition for a non-voter
// or the current leader.
func (s *Server) TransferLeader(ctx context.Context, req *coordpb.TransferLeaderRequest) (*coordpb.TransferLeaderResponse, error) {
	t, err := membership.NewTransfer(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.TransferLeaderResponse, error) {
		return coordpb.NewClusterClient(c).TransferLeader(ctx, req, o...)
	}); handled {
		return resp, err
	}
	id, err := s.membership.TransferLeader(ctx, t, transferWait)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.TransferLeaderResponse{LeaderId: id, Term: s.node.Raft().CurrentTerm()}, nil
}

// RegisterMember records the client-facing addresses of a member already
// in the raft configuration; members call it on themselves at start.
// NotFound when raft does not know the member, FailedPrecondition when its
// raft address differs from raft's configuration. Idempotent.
func (s *Server) RegisterMember(ctx context.Context, req *coordpb.RegisterMemberRequest) (*coordpb.RegisterMemberResponse, error) {
	r, err := membership.NewRegistration(req)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RegisterMemberResponse, error) {
		return coordpb.NewClusterClient(c).RegisterMember(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.membership.Register(ctx, r); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.RegisterMemberResponse{}, nil
}

// Snapshot streams this node's state machine snapshot (see WriteSnapshot).
func (s *Server) Snapshot(_ *coordpb.SnapshotRequest, stream grpc.ServerStreamingServer[coordpb.SnapshotChunk]) error {
	return s.WriteSnapshot(stream.Context(), &chunkWriter{stream: stream})
}

// WriteSnapshot writes a state machine snapshot to w. On the leader the
// state is read linearizably; a follower writes what it has applied.
func (s *Server) WriteSnapshot(ctx context.Context, w io.Writer) error {
	st := s.node.State()
	if s.node.IsLeader() {
		var err error
		if st, err = s.node.LinearizableRead(ctx); err != nil {
			return s.toStatus(ctx, err)
		}
	}
	if err := st.WriteSnapshot(w); err != nil {
		return s.toStatus(ctx, fmt.Errorf("write snapshot: %w", err))
	}
	return nil
}

// chunkWriter sends whatever it is given as SnapshotChunk messages.
type chunkWriter struct {
	stream grpc.ServerStreamingServer[coordpb.SnapshotChunk]
}

var _ io.Writer = (*chunkWriter)(nil)

func (w *chunkWriter) Write(p []byte) (int, error) {
	const max = 256 << 10
	for off := 0; off < len(p); off += max {
		end := min(off+max, len(p))
		if err := w.stream.Send(&coordpb.SnapshotChunk{Data: append([]byte(nil), p[off:end]...)}); err != nil {
			return off, err
		}
	}
	return len(p), nil
}

// raftMembership is the raft node as membership.Service sees it.
type raftMembership struct{ *raftnode.Node }

// Configuration is the node's raft configuration.
func (r raftMembership) Configuration() ([]membership.Server, error) {
	servers, err := r.Node.Configuration()
	out := make([]membership.Server, len(servers))
	for i, srv := range servers {
		out[i] = membership.Server(srv)
	}
	return out, err
}
