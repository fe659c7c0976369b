package streamingnode

import (
	"context"
	"crypto/x509"
	"errors"

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

// requireWriter admits a data-path write (Insert, an Append without a
// coordinator term) on a secure node only from a writer's client
// certificate (security.CheckDataPathWriter: a proxy, admin or coordd,
// never another streaming node or a read credential): Unauthenticated
// without one, PermissionDenied for a certificate that may not write. On
// an insecure node everyone is admitted, as before
// (docs/security.md#the-streaming-nodes-port).
func (n *Node) requireWriter(ctx context.Context, what string) error {
	if n.cfg.ServeTLS == nil {
		return nil
	}
	leaf, p := verifiedLeaf(ctx)
	err := security.CheckDataPathWriter(leaf, n.servingIdentity())
	if err == nil {
		return nil
	}
	n.log.Debug("refused a data-path write", "call", what, "peer", peerAddr(p), "error", err)
	if errors.Is(err, security.ErrNotWriter) {
		return status.Errorf(codes.PermissionDenied, "%s: %v", what, err)
	}
	return status.Errorf(codes.Unauthenticated, "%s: %v", what, err)
}

// requireReader admits a Read on a secure port from any certificate of the
// cluster that names a role or a node (security.CheckDataPathReader).
func (n *Node) requireReader(ctx context.Context) error {
	if n.cfg.ServeTLS == nil {
		return nil
	}
	leaf, p := verifiedLeaf(ctx)
	if err := security.CheckDataPathReader(leaf); err != nil {
		n.log.Debug("refused a WAL read", "peer", peerAddr(p), "error", err)
		return status.Errorf(codes.Unauthenticated, "Read: %v", err)
	}
	return nil
}

// verifiedLeaf is the caller's client certificate when the TLS handshake
// verified it against the cluster's CA (nil otherwise), and the peer.
func verifiedLeaf(ctx context.Context) (*x509.Certificate, *peer.Peer) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil, nil
	}
	if ti, isTLS := p.AuthInfo.(credentials.TLSInfo); isTLS && len(ti.State.VerifiedChains) > 0 && len(ti.State.PeerCertificates) > 0 {
		return ti.State.PeerCertificates[0], p
	}
	return nil, p
}

// servingIdentity is the node identity in the certificate this node serves
// its port with (0: none, a legacy node-role certificate).
func (n *Node) servingIdentity() uint64 {
	certs := n.cfg.ServeTLS.Certificates
	if len(certs) == 0 || len(certs[0].Certificate) == 0 {
		return 0
	}
	leaf := certs[0].Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(certs[0].Certificate[0]); err != nil {
			return 0
		}
	}
	id, _ := security.CertNode(leaf)
	return id
}

func peerAddr(p *peer.Peer) string {
	if p == nil || p.Addr == nil {
		return "unknown"
	}
	return p.Addr.String()
}
