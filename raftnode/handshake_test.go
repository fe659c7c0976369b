package raftnode

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode/datadir"
)

// fixedIdentity is a member identity that never changes.
type fixedIdentity datadir.Identity

func (f fixedIdentity) Identity() datadir.Identity { return datadir.Identity(f) }

// layerFor listens on a loopback port with the given identity.
func layerFor(t *testing.T, member, cluster string) *handshakeLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	id := fixedIdentity{MemberID: member, Incarnation: "inc-" + member, ClusterID: cluster}
	return &handshakeLayer{ln: ln, advertise: ln.Addr(), ident: id, logger: hclog.NewNullLogger()}
}

// exchange dials from a to b, and reports what b's accepted connection
// reads and the dial error.
func exchange(t *testing.T, a, b *handshakeLayer) (got string, dialErr error) {
	t.Helper()
	read := make(chan string, 1)
	go func() {
		c, err := b.Accept()
		if err != nil {
			read <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		buf, err := io.ReadAll(io.LimitReader(c, 5))
		if err != nil {
			read <- "read: " + err.Error()
			return
		}
		read <- string(buf)
	}()
	c, err := a.Dial(raft.ServerAddress(b.ln.Addr().String()), 2*time.Second)
	if err == nil {
		c.Write([]byte("raft!"))
		defer c.Close()
	}
	return <-read, err
}

// TestHandshakeChecksClusterID: raft bytes flow between members of the same
// cluster; a member of another cluster, a member without a cluster ID, and
// a dial to a member without one are refused, and the refused side's raft
// sees nothing.
func TestHandshakeChecksClusterID(t *testing.T) {
	cases := []struct {
		name             string
		dialer, acceptor string // cluster IDs
		refusal          string // "" if accepted
	}{
		{"same cluster", "c1", "c1", ""},
		{"other cluster", "c2", "c1", "member a belongs to cluster c2, this member to cluster c1"},
		{"dialer never joined", "", "c1", "member a has no cluster ID"},
		{"acceptor never joined", "c1", "", "member b has not bootstrapped or joined a cluster yet"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := layerFor(t, "a", tc.dialer), layerFor(t, "b", tc.acceptor)
			got, err := exchange(t, a, b)
			if tc.refusal == "" {
				if err != nil || got != "raft!" {
					t.Fatalf("dial: %v, acceptor read %q; want the raft bytes through", err, got)
				}
				return
			}
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.refusal) {
				t.Fatalf("dial error %v, want a refusal saying %q", err, tc.refusal)
			}
			if got != "" {
				t.Fatalf("refused acceptor handed %q to raft", got)
			}
		})
	}
	t.Run("test-only accept-any", func(t *testing.T) {
		a, b := layerFor(t, "a", "c2"), layerFor(t, "b", "c1")
		b.acceptAny = true
		if got, err := exchange(t, a, b); err != nil || got != "raft!" {
			t.Fatalf("dial: %v, read %q; want accepted", err, got)
		}
	})
}

// TestProbeAndForeignClients: a probe returns the member's identity without
// reaching raft; a client that speaks raft without the handshake is cut off.
func TestProbeAndForeignClients(t *testing.T) {
	b := layerFor(t, "b", "c1")
	go func() {
		for {
			c, err := b.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if n, err := c.Read(make([]byte, 8)); n > 0 || err != io.EOF {
					t.Errorf("acceptor read %d bytes, %v; want io.EOF", n, err)
				}
			}()
		}
	}()
	who, err := ProbeMember(b.ln.Addr().String(), 2*time.Second, nil)
	if err != nil || who.MemberID != "b" || who.ClusterID != "c1" || who.Incarnation != "inc-b" {
		t.Fatalf("probe: %+v, %v", who, err)
	}
	c, err := net.Dial("tcp", b.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("\x00raft rpc bytes without a handshake"))
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 8)); n != 0 || err == nil {
		t.Fatalf("foreign client got %d bytes, %v; want the connection closed", n, err)
	}
}
