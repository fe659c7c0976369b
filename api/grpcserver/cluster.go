package grpcserver

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/vocab"
)

// Status answers from this node's own view; it never forwards, so an
// operator can ask every member what it sees.
func (s *Server) Status(ctx context.Context, _ *coordpb.StatusRequest) (*coordpb.StatusResponse, error) {
	r := s.node.Raft()
	st := s.node.State()
	leaderID, leaderGRPC := s.leaderHint()
	members, err := s.members(st)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	snapIndex, _, _ := s.node.LastSnapshot()
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
		Members:           members,
		LastSnapshotIndex: snapIndex,
	}, nil
}

// members joins raft's configuration (who is a member, with what suffrage)
// with the FSM's address directory.
func (s *Server) members(st *fsm.State) ([]*coordpb.Member, error) {
	servers, err := s.node.Configuration()
	if err != nil {
		return nil, err
	}
	leaderID, _ := s.node.Leader()
	out := make([]*coordpb.Member, 0, len(servers))
	for _, srv := range servers {
		m := &coordpb.Member{Id: srv.ID, RaftAddr: srv.RaftAddr, Suffrage: "nonvoter", Leader: srv.ID == leaderID}
		if srv.Voter {
			m.Suffrage = "voter"
		}
		if rec, ok := st.Member(srv.ID); ok {
			m.GrpcAddr, m.HttpAddr = rec.GrpcAddr, rec.HttpAddr
		}
		out = append(out, m)
	}
	return out, nil
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

// upsertMember builds the validated UpsertMember command for a member and
// returns the record it carries.
func upsertMember(id, raftAddr, grpcAddr, httpAddr string) (commands.Command, *logpb.Member, error) {
	m := &logpb.Member{Id: id, RaftAddr: raftAddr, GrpcAddr: grpcAddr, HttpAddr: httpAddr}
	c, err := commands.New(&logpb.UpsertMember{Member: m}, "")
	return c, m, err
}

// AddVoter records a new member's addresses, then adds it to raft as a
// voter, and returns the members. FailedPrecondition when another member
// uses the raft address. Membership changes are not idempotent: after an
// outcome-unknown answer, check Members before retrying.
func (s *Server) AddVoter(ctx context.Context, req *coordpb.AddVoterRequest) (*coordpb.AddVoterResponse, error) {
	cmd, m, err := upsertMember(req.Id, req.RaftAddr, req.GrpcAddr, req.HttpAddr)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.AddVoterResponse, error) {
		return coordpb.NewClusterClient(c).AddVoter(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if err := s.checkAddressFree(m); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if err := s.checkJoinerCluster(m.Id, req.ClusterId, req.Joining); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	// Record the addresses first: a member raft knows about should always
	// be reachable through the directory.
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	if err := s.node.AddVoter(m.Id, m.RaftAddr); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	members, err := s.members(s.node.State())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.AddVoterResponse{Members: members, ClusterId: s.node.ClusterID()}, nil
}

// checkJoinerCluster refuses a member of another cluster, and a member
// joining from a data dir that never joined while it is already in the
// configuration (it lost its data dir, and its term and vote with it: it
// must be removed first).
func (s *Server) checkJoinerCluster(id, clusterID string, joining bool) error {
	own := s.node.ClusterID()
	if clusterID != "" && clusterID != own {
		return fmt.Errorf("%w: member %s belongs to cluster %s, this cluster is %s", errPrecondition, id, clusterID, own)
	}
	if clusterID == "" && joining {
		if _, err := s.findServer(id); err == nil {
			return fmt.Errorf("%w: member %s is already in the cluster but its data dir never joined it; "+
				"if it lost its data dir, remove it first (coordctl cluster remove %s), then join it again", errPrecondition, id, id)
		}
	}
	return nil
}

// checkAddressFree refuses a raft address already used by another member.
func (s *Server) checkAddressFree(m *logpb.Member) error {
	servers, err := s.node.Configuration()
	if err != nil {
		return err
	}
	for _, srv := range servers {
		if srv.RaftAddr == m.RaftAddr && srv.ID != m.Id {
			return fmt.Errorf("%w: raft address %s is already used by member %s", errPrecondition, m.RaftAddr, srv.ID)
		}
	}
	return nil
}

// RemoveMember removes a member from raft and forgets its addresses, and
// returns the members. NotFound for an unknown member. A leader asked to
// remove itself hands leadership over first and answers Unavailable with
// the new leader's hint, so the caller retries there.
func (s *Server) RemoveMember(ctx context.Context, req *coordpb.RemoveMemberRequest) (*coordpb.RemoveMemberResponse, error) {
	cmd, err := commands.New(&logpb.RemoveMember{Id: req.Id}, "")
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RemoveMemberResponse, error) {
		return coordpb.NewClusterClient(c).RemoveMember(ctx, req, o...)
	}); handled {
		return resp, err
	}
	if _, err := s.findServer(req.Id); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if req.Id == s.self.ID {
		// A leader removing itself would step down mid-call; hand over
		// first and let the client retry against the new leader.
		if err := s.node.TransferLeadership("", ""); err != nil {
			return nil, s.toStatus(ctx, err)
		}
		return nil, s.toStatus(ctx, fmt.Errorf("leadership handed over before removing %s; retry: %w", req.Id, &raftnode.NotLeaderError{}))
	}
	if err := s.node.RemoveServer(req.Id); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
	}
	members, err := s.members(s.node.State())
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	return &coordpb.RemoveMemberResponse{Members: members}, nil
}

func (s *Server) findServer(id string) (raftnode.Server, error) {
	servers, err := s.node.Configuration()
	if err != nil {
		return raftnode.Server{}, err
	}
	for _, srv := range servers {
		if srv.ID == id {
			return srv, nil
		}
	}
	return raftnode.Server{}, fmt.Errorf("%w: member %q is not in the cluster", errNotFound, id)
}

// TransferLeader hands leadership to the named voter (any voter when
// target_id is empty) and waits briefly for the new leader to be heard
// from. NotFound for an unknown member, FailedPrecondition for a non-voter
// or the current leader.
func (s *Server) TransferLeader(ctx context.Context, req *coordpb.TransferLeaderRequest) (*coordpb.TransferLeaderResponse, error) {
	if req.TargetId != "" {
		if err := vocab.ValidateMemberID(req.TargetId); err != nil {
			return nil, s.toStatus(ctx, err)
		}
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.TransferLeaderResponse, error) {
		return coordpb.NewClusterClient(c).TransferLeader(ctx, req, o...)
	}); handled {
		return resp, err
	}
	var addr string
	if req.TargetId != "" {
		srv, err := s.findServer(req.TargetId)
		if err != nil {
			return nil, s.toStatus(ctx, err)
		}
		if !srv.Voter {
			return nil, s.toStatus(ctx, fmt.Errorf("%w: member %s is not a voter", errPrecondition, srv.ID))
		}
		if srv.ID == s.self.ID {
			return nil, s.toStatus(ctx, fmt.Errorf("%w: member %s already leads", errPrecondition, srv.ID))
		}
		addr = srv.RaftAddr
	}
	if err := s.node.TransferLeadership(req.TargetId, addr); err != nil {
		return nil, s.toStatus(ctx, err)
	}
	// The transfer completes when the target wins its election; wait
	// (bounded) until this node has heard from the new leader.
	id := s.awaitNewLeader(ctx, 2*time.Second)
	return &coordpb.TransferLeaderResponse{LeaderId: id, Term: s.node.Raft().CurrentTerm()}, nil
}

// RegisterMember records the client-facing addresses of a member already
// in the raft configuration; members call it on themselves at start.
// NotFound when raft does not know the member, FailedPrecondition when its
// raft address differs from raft's configuration. Idempotent.
func (s *Server) RegisterMember(ctx context.Context, req *coordpb.RegisterMemberRequest) (*coordpb.RegisterMemberResponse, error) {
	cmd, m, err := upsertMember(req.Id, req.RaftAddr, req.GrpcAddr, req.HttpAddr)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if resp, handled, err := forward(s, ctx, func(ctx context.Context, c *grpc.ClientConn, o ...grpc.CallOption) (*coordpb.RegisterMemberResponse, error) {
		return coordpb.NewClusterClient(c).RegisterMember(ctx, req, o...)
	}); handled {
		return resp, err
	}
	srv, err := s.findServer(m.Id)
	if err != nil {
		return nil, s.toStatus(ctx, err)
	}
	if srv.RaftAddr != m.RaftAddr {
		return nil, s.toStatus(ctx, fmt.Errorf("%w: member %s has raft address %s in the raft configuration, not %s",
			errPrecondition, m.Id, srv.RaftAddr, m.RaftAddr))
	}
	if _, err := s.commit(ctx, cmd); err != nil {
		return nil, err
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

// awaitNewLeader polls until a leader other than this node is known, and
// returns its ID ("" if none appeared within max).
func (s *Server) awaitNewLeader(ctx context.Context, max time.Duration) string {
	deadline := time.Now().Add(max)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if id, _ := s.node.Leader(); id != "" && id != s.self.ID {
			return id
		}
		time.Sleep(10 * time.Millisecond)
	}
	id, _ := s.node.Leader()
	return id
}
