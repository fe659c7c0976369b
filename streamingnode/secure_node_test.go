package streamingnode

import (
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/security"
)

// secureNode is a streaming node serving TLS with node 1's certificate of a
// throwaway PKI, registered with a fake coordd, and the means to call it
// with any of the PKI's certificates.
type secureNode struct {
	*testNode
	pki    security.DevPKI
	coordd *security.Material // coordd's server certificate
	node   *security.Material // node 1's, the one the node serves with
	t      *testing.T
}

func startSecureNode(t *testing.T) *secureNode {
	t.Helper()
	pki, err := security.WriteDevPKI(filepath.Join(t.TempDir(), "pki"), time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s := &secureNode{pki: pki, t: t}
	s.coordd, s.node = s.load(pki.Server), s.load(pki.Node(1))
	serve, err := s.node.StreamingNodeServer()
	if err != nil {
		t.Fatal(err)
	}
	f := startFakeCoordWith(t, grpc.Creds(credentials.NewTLS(s.coordd.APIServer())))
	s.testNode = startNode(t, f, t.TempDir(), func(c *Config) { c.ServeTLS, c.CoordTLS = serve, s.node.APIClient("") })
	return s
}

// load reads one of the PKI's certificates.
func (s *secureNode) load(files security.Files) *security.Material {
	s.t.Helper()
	m, err := security.Load(files)
	if err != nil {
		s.t.Fatal(err)
	}
	return m
}

// dial is a client of the node presenting m's certificate.
func (s *secureNode) dial(m *security.Material) coordpb.StreamingNodeServiceClient {
	s.t.Helper()
	conn, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(security.StreamingNodeClient(m.APIClient("")))))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.Close() })
	return coordpb.NewStreamingNodeServiceClient(conn)
}
