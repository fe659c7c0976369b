package raftnode

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode/datadir"
)

// Every raft TCP connection starts with a handshake in which the dialing
// member names its cluster ID and member ID, and the accepting member
// answers with its own identity and a verdict. A member refuses raft traffic
// from a member of another cluster (or of a re-bootstrapped one, whose
// cluster ID differs) and from a member that has not bootstrapped or joined
// (no cluster ID), so a member that lost its data dir cannot be merged back
// in. The same handshake, with kind "probe", lets a member ask a peer who it
// is before bootstrapping (package cluster).
//
//	dialer:   "CDRH" kind(1 byte) len(uint16) JSON hello
//	acceptor: verdict(1 byte: 0 accepted, 1 refused) len(uint16) JSON PeerIdentity
//
// After an accepted "raft" handshake the connection carries raft's own
// protocol unchanged; after a "probe" the acceptor closes it.
//
// With TLS configured (Config.TLS) all of this runs inside mutual TLS: both
// sides present a certificate from the cluster's CA that carries the server
// identity (security.ServerURI), so a client certificate from the same CA
// cannot speak raft (docs/security.md).

const (
	handshakeMagic   = "CDRH"
	kindRaft         = byte(1)
	kindProbe        = byte(2)
	verdictAccepted  = byte(0)
	verdictRefused   = byte(1)
	handshakeTimeout = 5 * time.Second
	maxHandshakeLen  = 4096
)

type hello struct {
	ClusterID string `json:"cluster_id"`
	MemberID  string `json:"member_id"`
}

// PeerIdentity is what a member says about itself in a handshake.
type PeerIdentity struct {
	MemberID    string `json:"member_id"`
	ClusterID   string `json:"cluster_id,omitempty"`
	Incarnation string `json:"incarnation"`
	// Refused, when set, says why the acceptor refused the connection.
	Refused string `json:"refused,omitempty"`
}

// ErrRefused wraps a peer's refusal of a raft connection.
var ErrRefused = errors.New("raft connection refused")

// handshakeLayer is a raft.StreamLayer over TCP that runs the handshake on
// every connection.
type handshakeLayer struct {
	ln        net.Listener
	advertise net.Addr
	ident     interface{ Identity() datadir.Identity }
	logger    hclog.Logger
	// acceptAny turns the acceptor's check off (test only: it lets the
	// Jepsen-style suite prove its disk-loss scenario catches a member that
	// does not check identities).
	acceptAny bool
	// tls, when set, wraps every connection in mutual TLS.
	tls *RaftTLS
}

// RaftTLS is the raft port's mutual TLS: Server for accepted connections,
// Client for dialled ones (package security builds both).
type RaftTLS struct {
	Server, Client *tls.Config
}

// ClientConfig is t.Client, or nil for a plaintext transport (t nil).
func (t *RaftTLS) ClientConfig() *tls.Config {
	if t == nil {
		return nil
	}
	return t.Client
}

func (l *handshakeLayer) Accept() (net.Conn, error) {
	c, err := l.ln.Accept()
	if err != nil {
		return nil, err
	}
	if l.tls != nil {
		c = tls.Server(c, l.tls.Server)
	}
	return &acceptedConn{Conn: c, l: l}, nil
}

func (l *handshakeLayer) Close() error   { return l.ln.Close() }
func (l *handshakeLayer) Addr() net.Addr { return l.advertise }

func (l *handshakeLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	own := l.ident.Identity()
	c, reply, err := dialHandshake(string(address), timeout, l.tls.ClientConfig(), kindRaft, hello{ClusterID: own.ClusterID, MemberID: own.MemberID})
	if err != nil {
		return nil, err
	}
	if reply.Refused != "" {
		c.Close()
		return nil, fmt.Errorf("%w by member %s at %s: %s", ErrRefused, reply.MemberID, address, reply.Refused)
	}
	return c, nil
}

// dialHandshake connects to address (through TLS when tlsCfg is set) and
// runs the dialer's side.
func dialHandshake(address string, timeout time.Duration, tlsCfg *tls.Config, kind byte, h hello) (net.Conn, PeerIdentity, error) {
	if timeout <= 0 {
		timeout = handshakeTimeout
	}
	c, err := net.DialTimeout("tcp", address, timeout)
	if err != nil {
		return nil, PeerIdentity{}, err
	}
	c.SetDeadline(time.Now().Add(timeout))
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.Close()
			return nil, PeerIdentity{}, fmt.Errorf("raft TLS handshake with %s: %w", address, err)
		}
		c = tc
	}
	body, err := json.Marshal(h)
	if err != nil {
		c.Close()
		return nil, PeerIdentity{}, fmt.Errorf("encode handshake: %w", err)
	}
	msg := append([]byte(handshakeMagic), kind, 0, 0)
	binary.BigEndian.PutUint16(msg[len(handshakeMagic)+1:], uint16(len(body)))
	if _, err := c.Write(append(msg, body...)); err != nil {
		c.Close()
		return nil, PeerIdentity{}, fmt.Errorf("handshake with %s: %w", address, err)
	}
	var hdr [3]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		c.Close()
		return nil, PeerIdentity{}, fmt.Errorf("handshake with %s: no answer (not a coordd raft member, or an older one): %w", address, err)
	}
	var reply PeerIdentity
	if err := readJSON(c, binary.BigEndian.Uint16(hdr[1:]), &reply); err != nil {
		c.Close()
		return nil, PeerIdentity{}, fmt.Errorf("handshake with %s: %w", address, err)
	}
	if hdr[0] == verdictRefused && reply.Refused == "" {
		reply.Refused = "refused without a reason"
	}
	c.SetDeadline(time.Time{})
	return c, reply, nil
}

func readJSON(r io.Reader, n uint16, v any) error {
	if n > maxHandshakeLen {
		return fmt.Errorf("handshake of %d bytes is too long", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return fmt.Errorf("read handshake: %w", err)
	}
	if err := json.Unmarshal(buf, v); err != nil {
		return fmt.Errorf("decode handshake: %w", err)
	}
	return nil
}

// acceptedConn runs the acceptor's side of the handshake on the first Read
// (on raft's connection goroutine, so a slow peer never blocks Accept).
type acceptedConn struct {
	net.Conn
	l    *handshakeLayer
	once sync.Once
	err  error
}

func (c *acceptedConn) Read(p []byte) (int, error) {
	c.once.Do(func() { c.err = c.handshake() })
	if c.err != nil {
		return 0, c.err
	}
	return c.Conn.Read(p)
}

// handshake reads the dialer's hello and answers it. A probe, a refusal and
// a malformed handshake all end the connection with io.EOF so raft does not
// log a decode error on top of this layer's own message.
func (c *acceptedConn) handshake() error {
	c.Conn.SetDeadline(time.Now().Add(handshakeTimeout))
	remote := c.Conn.RemoteAddr()
	if tc, ok := c.Conn.(*tls.Conn); ok {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			c.l.logger.Error("refused a raft connection: TLS handshake failed (plaintext peer, unknown CA, expired certificate, or a certificate without the server identity)",
				"remote", remote, "error", err)
			return io.EOF
		}
	}
	br := bufio.NewReaderSize(c.Conn, 64)
	var hdr [len(handshakeMagic) + 3]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return io.EOF
	}
	if string(hdr[:len(handshakeMagic)]) != handshakeMagic {
		c.l.logger.Error("refused a raft connection without a coordd handshake (an older coordd or another program)", "remote", remote)
		return io.EOF
	}
	var h hello
	if err := readJSON(br, binary.BigEndian.Uint16(hdr[len(handshakeMagic)+1:]), &h); err != nil {
		c.l.logger.Error("refused a raft connection with a malformed handshake", "remote", remote, "error", err)
		return io.EOF
	}
	own := c.l.ident.Identity()
	reply := PeerIdentity{MemberID: own.MemberID, ClusterID: own.ClusterID, Incarnation: own.Incarnation}
	kind := hdr[len(handshakeMagic)]
	if kind == kindRaft && !c.l.acceptAny {
		reply.Refused = refusal(own, h)
	} else if kind != kindRaft && kind != kindProbe {
		reply.Refused = fmt.Sprintf("unknown handshake kind %d", kind)
	}
	if err := writeVerdict(c.Conn, reply); err != nil {
		return io.EOF
	}
	if reply.Refused != "" {
		c.l.logger.Error("refused a raft connection", "remote", remote, "from_member", h.MemberID,
			"from_cluster", datadir.ClusterOrNone(h.ClusterID), "reason", reply.Refused)
		return io.EOF
	}
	if kind == kindProbe {
		return io.EOF
	}
	if br.Buffered() > 0 {
		// raft's first bytes arrived with the handshake; keep them.
		c.Conn = &prefixedConn{Conn: c.Conn, r: io.MultiReader(br, c.Conn)}
	}
	c.Conn.SetDeadline(time.Time{})
	return nil
}

// refusal says why a member with identity own must refuse raft traffic from
// the dialer h, or "" to accept it.
func refusal(own datadir.Identity, h hello) string {
	switch {
	case own.ClusterID == "":
		return fmt.Sprintf("member %s has not bootstrapped or joined a cluster yet", own.MemberID)
	case h.ClusterID == "":
		return fmt.Sprintf("member %s has no cluster ID: it never bootstrapped or joined this cluster, "+
			"or it lost its data dir and must be replaced (remove it, then join it with an empty data dir)", h.MemberID)
	case h.ClusterID != own.ClusterID:
		return fmt.Sprintf("member %s belongs to cluster %s, this member to cluster %s", h.MemberID, h.ClusterID, own.ClusterID)
	}
	return ""
}

func writeVerdict(w io.Writer, reply PeerIdentity) error {
	body, err := json.Marshal(reply)
	if err != nil {
		return err
	}
	msg := []byte{verdictAccepted, 0, 0}
	if reply.Refused != "" {
		msg[0] = verdictRefused
	}
	binary.BigEndian.PutUint16(msg[1:], uint16(len(body)))
	_, err = w.Write(append(msg, body...))
	return err
}

type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// ProbeMember asks the member whose raft transport listens on raftAddr who
// it is, without opening a raft connection. tlsCfg is the raft port's
// client TLS (RaftTLS.Client), nil for a plaintext cluster.
func ProbeMember(raftAddr string, timeout time.Duration, tlsCfg *tls.Config) (PeerIdentity, error) {
	c, reply, err := dialHandshake(raftAddr, timeout, tlsCfg, kindProbe, hello{})
	if err != nil {
		return PeerIdentity{}, err
	}
	c.Close()
	if reply.Refused != "" {
		return reply, fmt.Errorf("%w by %s: %s", ErrRefused, raftAddr, reply.Refused)
	}
	return reply, nil
}

// newTCPTransport builds raft's network transport over the handshake layer.
func newTCPTransport(cfg Config, ident interface{ Identity() datadir.Identity }) (*raft.NetworkTransport, error) {
	addr, err := net.ResolveTCPAddr("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("resolve raft address %q: %w", cfg.RaftAddr, err)
	}
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on raft address %s: %w", cfg.RaftAddr, err)
	}
	layer := &handshakeLayer{ln: ln, advertise: addr, ident: ident, logger: cfg.Logger.Named("handshake"),
		acceptAny: cfg.TestOnlySkipIdentityCheck, tls: cfg.TLS}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: cfg.AddressProvider,
		Logger:                cfg.Logger.Named("transport"),
		Stream:                layer,
		MaxPool:               4,
		Timeout:               2 * time.Second,
	}), nil
}
