package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/vocab"
)

// Options says how this member enters the cluster.
type Options struct {
	Self   raftnode.Self
	Peers  []raftnode.Peer // static bootstrap list (may be empty with Join)
	Join   string          // gRPC address of any member
	Logger hclog.Logger
	// TestOnlySkipIdentityCheck: see raftnode.Config.
	TestOnlySkipIdentityCheck bool
	// RaftTLS is the raft port's TLS (probes of peers before bootstrap);
	// nil for a plaintext cluster.
	RaftTLS *raftnode.RaftTLS
	// APITLS, when set, is the client TLS for calls to other members'
	// gRPC ports (join) and to this member's own (registration).
	APITLS *tls.Config
}

// ParsePeers parses "id=raftaddr,id=raftaddr,...".
func ParsePeers(s string) ([]raftnode.Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var peers []raftnode.Peer
	ids, addrs := map[string]bool{}, map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("peer %q: want id=host:port", part)
		}
		if err := vocab.ValidateMemberID(id); err != nil {
			return nil, fmt.Errorf("peer %q: %w", part, err)
		}
		if err := vocab.ValidateAddr("raft address", addr, true); err != nil {
			return nil, fmt.Errorf("peer %q: %w", part, err)
		}
		if ids[id] || addrs[addr] {
			return nil, fmt.Errorf("peer %q: duplicate id or address", part)
		}
		ids[id], addrs[addr] = true, true
		peers = append(peers, raftnode.Peer{ID: id, RaftAddr: addr})
	}
	return peers, nil
}

// CheckOptions validates the combination of flags before anything starts.
func CheckOptions(o Options) error {
	if len(o.Peers) > 0 {
		found := false
		for _, p := range o.Peers {
			if p.ID == o.Self.ID {
				found = true
				if p.RaftAddr != o.Self.RaftAddr {
					return fmt.Errorf("--peers lists %s at %s, but --raft-addr is %s", p.ID, p.RaftAddr, o.Self.RaftAddr)
				}
			}
		}
		if !found {
			return fmt.Errorf("--peers does not list this member's --id %q", o.Self.ID)
		}
	}
	if len(o.Peers) > 0 && o.Join != "" {
		return errors.New("give --peers to bootstrap a new cluster or --join to join a running one, not both")
	}
	if o.Join != "" {
		if err := vocab.ValidateAddr("--join", o.Join, true); err != nil {
			return err
		}
	}
	return nil
}

// Enter bootstraps or joins as the options and the data dir say. It returns
// once this member is part of a raft configuration (or already was).
func Enter(ctx context.Context, node *raftnode.Node, o Options) error {
	existing, err := node.HasExistingState()
	if err != nil {
		return fmt.Errorf("inspect raft state: %w", err)
	}
	switch {
	case existing && node.ClusterID() == "" && !o.TestOnlySkipIdentityCheck:
		return fmt.Errorf("data dir %s holds raft state but %s records no cluster ID; it cannot be trusted: "+
			"replace this member (docs/operations.md#replacing-a-member)", node.DataDir(), datadir.IdentityFile)
	case existing:
		o.Logger.Info("existing raft state found; not bootstrapping or joining (--peers and --join are ignored)",
			"cluster_id", node.ClusterID())
		return nil
	case len(o.Peers) > 0:
		id, err := agreeClusterID(ctx, node, o)
		if err != nil {
			return err
		}
		if err := node.SetClusterID(id); err != nil {
			return err
		}
		o.Logger.Info("bootstrapping cluster", "peers", len(o.Peers), "cluster_id", id)
		return node.Bootstrap(o.Peers)
	case o.Join != "":
		return join(ctx, node, o)
	}
	return errors.New("no raft state in --data-dir: give --peers to bootstrap a new cluster or --join to join one")
}

// join asks the cluster, through any member, to add this member as a voter.
func join(ctx context.Context, node *raftnode.Node, o Options) error {
	conn, err := grpc.NewClient(o.Join, o.transportCredentials())
	if err != nil {
		return fmt.Errorf("dial --join %s: %w", o.Join, err)
	}
	defer conn.Close()
	c := coordpb.NewClusterClient(conn)
	req := &coordpb.AddVoterRequest{Id: o.Self.ID, RaftAddr: o.Self.RaftAddr, GrpcAddr: o.Self.GRPCAddr, HttpAddr: o.Self.HTTPAddr,
		ClusterId: node.ClusterID(), Joining: true}
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		resp, err := c.AddVoter(cctx, req)
		cancel()
		if err == nil {
			if resp.ClusterId == "" {
				return fmt.Errorf("join via %s: the cluster did not tell its cluster ID (an older coordd?)", o.Join)
			}
			// Recorded before raft traffic from the cluster is accepted.
			if err := node.SetClusterID(resp.ClusterId); err != nil {
				return fmt.Errorf("join via %s: %w", o.Join, err)
			}
			o.Logger.Info("joined cluster", "via", o.Join, "cluster_id", resp.ClusterId)
			return nil
		}
		if c := status.Code(err); c == codes.FailedPrecondition || c == codes.InvalidArgument {
			return fmt.Errorf("join via %s refused: %s", o.Join, status.Convert(err).Message())
		}
		o.Logger.Warn("join failed; retrying", "via", o.Join, "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("join via %s: %w (last error: %v)", o.Join, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// KeepRegistered makes sure the FSM records this member's current
// addresses, re-checking periodically until ctx ends. It goes through the
// member's own gRPC server, which forwards to the leader.
func KeepRegistered(ctx context.Context, node *raftnode.Node, o Options) {
	conn, err := grpc.NewClient(o.Self.GRPCAddr, o.transportCredentials())
	if err != nil {
		o.Logger.Error("registration: cannot dial own gRPC address", "error", err)
		return
	}
	defer conn.Close()
	c := coordpb.NewClusterClient(conn)
	req := &coordpb.RegisterMemberRequest{Id: o.Self.ID, RaftAddr: o.Self.RaftAddr, GrpcAddr: o.Self.GRPCAddr, HttpAddr: o.Self.HTTPAddr}
	wait := 200 * time.Millisecond
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if registered(node, o.Self) {
			wait = 2 * time.Second
			continue
		}
		if id, _ := node.Leader(); id == "" {
			wait = 200 * time.Millisecond
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.RegisterMember(cctx, req)
		cancel()
		if err != nil {
			o.Logger.Debug("registration failed; will retry", "error", err)
			wait = 500 * time.Millisecond
		}
	}
}

func registered(node *raftnode.Node, self raftnode.Self) bool {
	m, ok := node.State().Member(self.ID)
	return ok && m.RaftAddr == self.RaftAddr && m.GrpcAddr == self.GRPCAddr && m.HttpAddr == self.HTTPAddr
}

// transportCredentials is how this member dials members' gRPC ports: TLS
// with its server certificate (which identifies it as a server, so the
// callee lets it join and register) when configured, else plaintext.
func (o Options) transportCredentials() grpc.DialOption {
	if o.APITLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(o.APITLS))
}
