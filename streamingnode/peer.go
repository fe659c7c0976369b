package streamingnode

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/security"
)

// requireCoordinator admits a call only from coordd on a secure node
// (Config.ServeTLS): the caller must have presented a certificate that
// chains to the cluster's CA (the TLS handshake verified it) and carries
// coordd's server identity, which only coordd members hold. On an insecure
// node everyone is admitted, as before. what names the call for the error.
func (n *Node) requireCoordinator(ctx context.Context, what string) error {
	if n.cfg.ServeTLS == nil {
		return nil
	}
	p, ok := peer.FromContext(ctx)
	if ok {
		if ti, isTLS := p.AuthInfo.(credentials.TLSInfo); isTLS && len(ti.State.VerifiedChains) > 0 &&
			len(ti.State.PeerCertificates) > 0 && security.IsServerCert(ti.State.PeerCertificates[0]) {
			return nil
		}
	}
	n.log.Warn("refused a coordinator call from a caller without coordd's server identity", "call", what, "peer", peerAddr(p))
	return status.Errorf(codes.PermissionDenied,
		"%s is coordd's call: it needs mutual TLS with a certificate carrying the coordd server identity %s", what, security.ServerURI)
}

func peerAddr(p *peer.Peer) string {
	if p == nil || p.Addr == nil {
		return "unknown"
	}
	return p.Addr.String()
}
