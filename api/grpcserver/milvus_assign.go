package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/controller/channels"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// AssignmentDiscover is Milvus's assignment stream: the full assignment
// (version, every live streaming node with the PChannels assigned to it at
// their terms and access modes, the control channel, the replication
// configuration), sent at once and again after every change, from this
// member's applied state like WatchAssignments. The client may send
// report_error (the WAL of a PChannel broke at a term: coordd's
// ReportAssignmentError, which fences exactly that term) and close (the
// server answers close and ends the stream). A report coordd refuses — a
// stale term, an unknown PChannel — ends the stream with that refusal
// (UNMATCHED_CHANNEL_TERM, CHANNEL_NOT_EXIST) and changes nothing; a
// Milvus client reopens the stream and gets the full assignment again.
func (m *milvusServer) AssignmentDiscover(stream grpc.BidiStreamingServer[milvuspb.AssignmentDiscoverRequest, milvuspb.AssignmentDiscoverResponse]) error {
	s := m.s
	ctx := stream.Context()
	if err := s.admitWatcher(); err != nil {
		return err
	}
	defer s.watchers.Add(-1)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The reader hands over what the client sends; the loop below is the
	// only sender on the stream.
	cmds := make(chan *milvuspb.AssignmentDiscoverRequest)
	readErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				readErr <- err
				return
			}
			select {
			case cmds <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	var sent fsm.AssignmentVersion
	hasSent := false
	for {
		changed := s.node.StateChanged()
		st := s.node.State()
		if cur := st.AssignmentVersion(); !hasSent || sent.Less(cur) {
			if err := stream.Send(&milvuspb.AssignmentDiscoverResponse{Response: &milvuspb.AssignmentDiscoverResponse_FullAssignment{
				FullAssignment: milvusFullAssignment(st)}}); err != nil {
				return err
			}
			sent, hasSent = cur, true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.closed:
			return nil
		case err := <-readErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		case req := <-cmds:
			switch c := req.Command.(type) {
			case *milvuspb.AssignmentDiscoverRequest_Close:
				return stream.Send(&milvuspb.AssignmentDiscoverResponse{Response: &milvuspb.AssignmentDiscoverResponse_Close{
					Close: &milvuspb.CloseAssignmentDiscoverResponse{}}})
			case *milvuspb.AssignmentDiscoverRequest_ReportError:
				if err := m.reportError(ctx, c.ReportError); err != nil {
					return err
				}
			default:
				return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "an AssignmentDiscover request must be report_error or close")
			}
		case <-changed:
		}
	}
}

// reportError runs a client's report through coordd's
// ReportAssignmentError (forwarded to the leader there); a report that
// changed nothing is refused.
func (m *milvusServer) reportError(ctx context.Context, r *milvuspb.ReportAssignmentErrorRequest) error {
	s := m.s
	p := r.GetPchannel()
	if p.GetName() == "" {
		return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT, "report_error names no pchannel")
	}
	cur, ok := s.node.State().PChannel(p.Name)
	if !ok {
		return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_CHANNEL_NOT_EXIST, "pchannel "+p.Name+" does not exist")
	}
	// Known stale on this member's state (terms only grow): refused here,
	// with nothing proposed. A term this member has not seen yet goes to
	// the leader, which decides.
	if p.Term < cur.Term || p.Term == cur.Term && !channels.Assigned(cur) {
		return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_UNMATCHED_CHANNEL_TERM,
			fmt.Sprintf("pchannel %s is at term %d (%s); the report is for term %d: nothing changed", p.Name, cur.Term, channels.StateName(cur), p.Term))
	}
	cause := r.GetErr().GetCause()
	if cause == "" {
		cause = "reported by a Milvus client: " + r.GetErr().GetCode().String()
	}
	resp, err := s.ReportAssignmentError(ctx, &coordpb.ReportAssignmentErrorRequest{Pchannel: p.Name, Term: p.Term, Error: cause})
	if err != nil {
		return s.toMilvusStatus(ctx, err)
	}
	if !resp.Marked {
		return streamingStatus(milvuspb.StreamingCode_STREAMING_CODE_UNMATCHED_CHANNEL_TERM,
			"pchannel "+p.Name+" is not assigned at the reported term: nothing changed")
	}
	return nil
}

// milvusFullAssignment is st's assignment view as Milvus shows it. Only
// ASSIGNED PChannels are listed under their node (a Milvus client opens a
// WAL only there); a node with none is listed with no channels.
func milvusFullAssignment(st *fsm.State) *milvuspb.FullStreamingNodeAssignmentWithVersion {
	v := st.AssignmentVersion()
	full := st.AssignmentChangesSince(fsm.AssignmentVersion{}, false)
	byNode := map[uint64]*milvuspb.StreamingNodeAssignment{}
	out := &milvuspb.FullStreamingNodeAssignmentWithVersion{
		Version:          &milvuspb.VersionPair{Global: int64(v.Global), Local: int64(v.Local)},
		StreamingVersion: &milvuspb.StreamingVersion{Version: 1},
	}
	for _, n := range full.Nodes {
		a := &milvuspb.StreamingNodeAssignment{Node: &milvuspb.StreamingNodeInfo{ServerId: int64(n.Id), Address: n.Address}}
		byNode[n.Id] = a
		out.Assignments = append(out.Assignments, a)
	}
	for _, p := range full.PChannels {
		a, ok := byNode[p.NodeId]
		if !ok || !channels.Assigned(p) {
			continue
		}
		mode := milvuspb.PChannelAccessMode_PCHANNEL_ACCESS_READWRITE
		if channels.ReadOnly(p) {
			mode = milvuspb.PChannelAccessMode_PCHANNEL_ACCESS_READONLY
		}
		a.Channels = append(a.Channels, &milvuspb.PChannelInfo{Name: p.Name, Term: p.Term, AccessMode: mode})
	}
	sort.Slice(out.Assignments, func(i, j int) bool { return out.Assignments[i].Node.ServerId < out.Assignments[j].Node.ServerId })
	if cch := st.CChannel(); cch != "" {
		out.Cchannel = &milvuspb.CChannelAssignment{Meta: &milvuspb.CChannelMeta{Pchannel: vocab.PChannelOf(cch)}}
	}
	out.ReplicateConfiguration = milvusReplicateConfig(channels.APIReplicateConfig(st.ReplicateConfiguration()))
	return out
}

// milvusReplicateConfig shows coordd's configuration in Milvus's shape
// (coordd keeps no connection parameters: see docs/milvus.md#replication).
func milvusReplicateConfig(c *coordpb.ReplicateConfiguration) *milvuspb.ReplicateConfiguration {
	if c == nil {
		return nil
	}
	out := &milvuspb.ReplicateConfiguration{}
	for _, cl := range c.Clusters {
		out.Clusters = append(out.Clusters, &milvuspb.MilvusCluster{ClusterId: cl.ClusterId, Pchannels: cl.Pchannels})
	}
	for _, t := range c.Topology {
		out.CrossClusterTopology = append(out.CrossClusterTopology, &milvuspb.CrossClusterTopology{SourceClusterId: t.SourceClusterId, TargetClusterId: t.TargetClusterId})
	}
	return out
}

// UpdateReplicateConfiguration is coordd's UpdateReplicateConfiguration
// (docs/semantics.md#replication-configuration) with Milvus's message:
// the clusters' IDs and PChannels and the topology are installed;
// connection parameters (URI, token) are not kept, since coordd never
// connects to another cluster (docs/milvus.md#replication).
func (m *milvusServer) UpdateReplicateConfiguration(ctx context.Context, req *milvuspb.UpdateReplicateConfigurationRequest) (*milvuspb.UpdateReplicateConfigurationResponse, error) {
	var cfg *coordpb.ReplicateConfiguration
	if c := req.GetConfiguration(); c != nil {
		cfg = &coordpb.ReplicateConfiguration{}
		for _, cl := range c.Clusters {
			cfg.Clusters = append(cfg.Clusters, &coordpb.ReplicateCluster{ClusterId: cl.ClusterId, Pchannels: cl.Pchannels})
		}
		for _, t := range c.CrossClusterTopology {
			cfg.Topology = append(cfg.Topology, &coordpb.ReplicateTopology{SourceClusterId: t.SourceClusterId, TargetClusterId: t.TargetClusterId})
		}
	}
	if _, err := m.s.UpdateReplicateConfiguration(ctx, &coordpb.UpdateReplicateConfigurationRequest{Config: cfg}); err != nil {
		return nil, m.s.toMilvusStatus(ctx, err)
	}
	return &milvuspb.UpdateReplicateConfigurationResponse{}, nil
}

// UpdateWALBalancePolicy is refused (Milvus 2.6 deprecates it).
func (m *milvusServer) UpdateWALBalancePolicy(ctx context.Context, _ *milvuspb.UpdateWALBalancePolicyRequest) (*milvuspb.UpdateWALBalancePolicyResponse, error) {
	return nil, status.Error(codes.Unimplemented, errMilvusUnimplemented.Error())
}
