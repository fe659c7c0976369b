package balancer

import (
	"context"
	"crypto/tls"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/conncache"
)

// StreamingClient makes the WAL lifecycle calls to streaming nodes.
type StreamingClient interface {
	// Assign asks node to open pchannel's WAL at term, fenced by coordTerm
	// (docs/architecture.md#fencing). A nil error means the node holds it.
	Assign(ctx context.Context, node NodeTarget, pchannel string, term int64, mode logpb.AccessMode, coordTerm uint64) error
	// Remove asks node to close pchannel's WAL if held at term or older.
	Remove(ctx context.Context, node NodeTarget, pchannel string, term int64, coordTerm uint64) error
	// Close releases the client's connections.
	Close()
}

// NodeTarget names the streaming node a call is meant for: its address and
// the registration (ID and epoch) the node checks, so a call never acts on
// another process that now serves the same address.
type NodeTarget struct {
	Addr  string
	ID    uint64
	Epoch uint64
}

func targetOf(n *logpb.StreamingNodeRecord) NodeTarget {
	return NodeTarget{Addr: n.Address, ID: n.Id, Epoch: n.Epoch}
}

// grpcStreamingClient keeps one connection per node address (unused ones
// are closed, conncache).
type grpcStreamingClient struct {
	conns *conncache.Cache
}

// newGRPCStreamingClient dials nodes with tlsCfg (plaintext when nil;
// conncache.New).
func newGRPCStreamingClient(tlsCfg *tls.Config) *grpcStreamingClient {
	return &grpcStreamingClient{conns: conncache.New(0, nil, streamingDialOptions(tlsCfg)...)}
}

// streamingDialOptions are the transport options for streaming nodes:
// TLS with tlsCfg, or none (conncache's plaintext default) when nil.
func streamingDialOptions(tlsCfg *tls.Config) []grpc.DialOption {
	if tlsCfg == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg))}
}

func (c *grpcStreamingClient) client(addr string) (coordpb.StreamingNodeServiceClient, error) {
	conn, err := c.conns.Get(addr)
	if err != nil {
		return nil, err
	}
	return coordpb.NewStreamingNodeServiceClient(conn), nil
}

// ModeName is the API spelling of an access mode.
func ModeName(m logpb.AccessMode) string {
	if m == logpb.AccessMode_ACCESS_RO {
		return "RO"
	}
	return "RW"
}

func (c *grpcStreamingClient) Assign(ctx context.Context, node NodeTarget, pchannel string, term int64, mode logpb.AccessMode, coordTerm uint64) error {
	cl, err := c.client(node.Addr)
	if err != nil {
		return err
	}
	_, err = cl.Assign(ctx, &coordpb.AssignRequest{Pchannel: pchannel, Term: term, AccessMode: ModeName(mode), CoordTerm: coordTerm,
		NodeId: node.ID, Epoch: node.Epoch})
	return err
}

func (c *grpcStreamingClient) Remove(ctx context.Context, node NodeTarget, pchannel string, term int64, coordTerm uint64) error {
	cl, err := c.client(node.Addr)
	if err != nil {
		return err
	}
	_, err = cl.Remove(ctx, &coordpb.RemoveRequest{Pchannel: pchannel, Term: term, CoordTerm: coordTerm, NodeId: node.ID, Epoch: node.Epoch})
	return err
}

func (c *grpcStreamingClient) Close() { c.conns.Close() }
