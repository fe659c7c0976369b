package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// The hostile-client nemesis plays a caller that holds a real credential
// of the wrong kind: a read token, a proxy's node-role token, an admin
// token, another streaming node's credential. It reads public state (the
// PChannel owners, their terms and epochs, the VChannels, the growing
// segments, the pending broadcasts) and forges the calls only the owning
// streaming node may make: a checkpoint far past the WAL's end (offset
// 2^40, time tick 2^62), an ack of a pending broadcast, binlog paths for a
// growing segment, and a Remove sent straight to the owner's port. Every
// forged call is recorded in the history (f = "hostile:<kind>"): ok when
// it was accepted, fail when it was refused, info when the answer was
// lost. The checkers (checker/hostile.go) require every one refused, and
// the data checkers show what an accepted one cost.

// Forged call kinds, as recorded in the history (prefixed HostilePrefix).
const (
	HostilePrefix    = "hostile:"
	ForgeCheckpoint  = "checkpoint"
	ForgeAck         = "ack"
	ForgeBinlogs     = "binlogs"
	ForgeRemove      = "remove"
	FOwners          = "pchannel-owners" // the owner observer's records
	forgedOffset     = uint64(1) << 40
	forgedTimestamp  = uint64(1) << 62
	forgedLogID      = int64(1) << 40
	observeInterval  = 200 * time.Millisecond
	hostileCallLimit = 2 * time.Second
	// removeCallLimit outlasts the streaming node's wait for coordd to
	// confirm a Remove (3 s by default), so a refused one is answered.
	removeCallLimit = 5 * time.Second
)

// HostileCred is one credential the hostile client holds.
type HostileCred struct {
	// Name says whose it is: "read", "proxy", "admin", "other-node".
	Name string
	// Config adds the credential to a client configuration.
	Config func(client.Config) client.Config
	// DialNode connects to a streaming node's own port with it.
	DialNode func(addr string) (*grpc.ClientConn, error)
	// NodeAddr, for a streaming node's own credential, is that node's
	// address: it forges only for PChannels another node owns (for its
	// own it would be the owner, not a forger).
	NodeAddr string
}

// HostileConfig parameterises the hostile nemesis.
type HostileConfig struct {
	Seed     uint64
	Duration time.Duration
	// Endpoints are the members' gRPC addresses (direct).
	Endpoints []string
	Creds     []HostileCred
	// Observer reads the owners (read role) and the streaming nodes'
	// status; its records feed the pchannel-owned checker.
	Observer HostileCred
	Recorder *history.Recorder
	// ClientID is the history client of the forged calls; ClientID+1 is
	// the owner observer's.
	ClientID int
	// Logf, when set, logs what the nemesis could not do.
	Logf func(format string, args ...any)
	// Kinds limits the forged calls to these kinds (default: all four).
	Kinds []string
	// Claims adds the claim writer (claim.go): the proxy credential claims
	// upcoming broadcast IDs on the streaming nodes every 100-300 ms for
	// Duration; its history client is ClientID+2.
	Claims bool
}

// ForgedIn is the input of a forged call in the history.
type ForgedIn struct {
	Cred    string `json:"cred"`
	Target  string `json:"target"`
	Node    uint64 `json:"node"`
	Term    int64  `json:"term"`
	Segment int64  `json:"segment,omitempty"`
	ID      uint64 `json:"broadcast_id,omitempty"`
}

// OwnerView is one owner observation: per PChannel what coordd says and
// whether the named node holds its WAL at that term.
type OwnerView map[string]OwnerState

// OwnerState is one PChannel in an OwnerView.
type OwnerState struct {
	State string `json:"state"`
	Node  uint64 `json:"node"`
	Term  int64  `json:"term"`
	// Held: the node's own status lists the PChannel's WAL at Term.
	Held bool `json:"held"`
}

// Owned is whether the PChannel had a working owner.
func (s OwnerState) Owned() bool { return s.State == "ASSIGNED" && s.Held }

// RunHostile forges calls for cfg.Duration (a pause of 300-900 ms between
// them, kinds and credentials drawn from the seed, every pair once before
// any repeats) while the owner observer records the PChannels' owners
// every 200 ms until ctx ends (the load stops).
func RunHostile(ctx context.Context, cfg HostileConfig) {
	if len(cfg.Creds) == 0 {
		return
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	done := make(chan struct{})
	go func(loadCtx context.Context) {
		defer close(done)
		observeOwners(loadCtx, cfg)
	}(ctx)
	defer func() { <-done }()
	ctx, cancel := context.WithTimeout(ctx, cfg.Duration) // forging stops here; the observer goes on
	defer cancel()
	if cred, ok := claimCred(cfg.Creds); ok && cfg.Claims {
		claimed := make(chan struct{})
		go func() {
			defer close(claimed)
			runClaims(ctx, cfg, cred)
		}()
		defer func() { cancel(); <-claimed }()
	}

	rng := rand.New(rand.NewPCG(cfg.Seed, 0x686f7374))
	kinds := []string{ForgeCheckpoint, ForgeAck, ForgeBinlogs, ForgeRemove}
	if len(cfg.Kinds) > 0 {
		kinds = cfg.Kinds
	}
	type pair struct{ kind, cred int }
	var bag []pair
	clients := make([]*client.Client, len(cfg.Creds))
	for i, cr := range cfg.Creds {
		c, err := client.New(ctx, cr.Config(client.Config{Endpoints: cfg.Endpoints, RequestTimeout: hostileCallLimit,
			AttemptTimeout: time.Second, DialTimeout: 500 * time.Millisecond}))
		if err != nil {
			return
		}
		defer c.Close()
		clients[i] = c
	}
	reader, err := client.New(ctx, cfg.Observer.Config(client.Config{Endpoints: cfg.Endpoints, RequestTimeout: hostileCallLimit}))
	if err != nil {
		return
	}
	defer reader.Close()
	skipped := 0
	for ctx.Err() == nil {
		if len(bag) == 0 {
			for k := range kinds {
				for c := range cfg.Creds {
					bag = append(bag, pair{k, c})
				}
			}
			rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		if !sleep(ctx, time.Duration(300+rng.IntN(600))*time.Millisecond) {
			return
		}
		p := bag[0]
		st, err := readPublic(ctx, reader)
		if err != nil {
			cfg.Logf("hostile nemesis: reading the public state: %v", err)
			continue // nothing to forge from yet (or a fault): try again
		}
		if forge(ctx, cfg, kinds[p.kind], cfg.Creds[p.cred], clients[p.cred], st, rng) {
			bag = bag[1:]
			continue
		}
		// Nothing to forge this kind from (no pending broadcast, no growing
		// segment): move it to the back of the bag.
		bag = append(bag[1:], p)
		if skipped++; skipped%10 == 0 {
			cfg.Logf("hostile nemesis: %d rounds found nothing to forge (last: %s)", skipped, kinds[p.kind])
		}
	}
}

// public is what anyone with a read credential can see.
type public struct {
	pchannels map[string]*coordpb.PChannel
	nodes     map[uint64]*coordpb.StreamingNode
	vchannels []string // with a checkpoint: the write path uses them
	pending   []*coordpb.BroadcastInfo
	coordTerm uint64
}

func readPublic(ctx context.Context, c *client.Client) (*public, error) {
	p := &public{pchannels: map[string]*coordpb.PChannel{}, nodes: map[uint64]*coordpb.StreamingNode{}}
	pcs, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		return nil, err
	}
	for _, pc := range pcs.Pchannels {
		p.pchannels[pc.Name] = pc
	}
	ns, err := c.ListNodes(ctx, coordpb.ReadConsistency_LINEARIZABLE, false)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		p.nodes[n.Id] = n
	}
	cps, err := c.ListChannelCheckpoints(ctx, 0)
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		if !cp.Dropped {
			p.vchannels = append(p.vchannels, cp.Vchannel)
		}
	}
	if p.pending, err = c.ListBroadcasts(ctx, true, 64); err != nil {
		return nil, err
	}
	st, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	p.coordTerm = st.Term
	return p, nil
}

// pchannelOf is the PChannel of a VChannel named <pchannel>_<collection>v<shard>.
func pchannelOf(vch string) string {
	if i := strings.LastIndex(vch, "_"); i > 0 {
		return vch[:i]
	}
	return vch
}

// forge makes one forged call of kind with cred and records it; false when
// the public state offered nothing to forge (nothing recorded).
func forge(ctx context.Context, cfg HostileConfig, kind string, cred HostileCred, c *client.Client, st *public, rng *rand.Rand) bool {
	owner := func(pch string) (*coordpb.PChannel, *coordpb.StreamingNode, bool) {
		pc := st.pchannels[pch]
		if pc == nil || pc.State != "ASSIGNED" || st.nodes[pc.NodeId] == nil {
			return nil, nil, false
		}
		if cred.NodeAddr != "" && st.nodes[pc.NodeId].Address == cred.NodeAddr {
			return nil, nil, false // the credential's own node: not a forgery
		}
		return pc, st.nodes[pc.NodeId], true
	}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	cctx, cancel := context.WithTimeout(ctx, hostileCallLimit)
	defer cancel()
	switch kind {
	case ForgeCheckpoint, ForgeBinlogs:
		if len(st.vchannels) == 0 {
			return false
		}
		vch := pick(st.vchannels)
		pc, _, ok := owner(pchannelOf(vch))
		if !ok {
			return false
		}
		in := ForgedIn{Cred: cred.Name, Target: vch, Node: pc.NodeId, Term: pc.Term}
		if kind == ForgeCheckpoint {
			p := cfg.Recorder.Invoke(cfg.ClientID, HostilePrefix+kind, in)
			resp, err := c.UpdateChannelCheckpoints(cctx, pc.NodeId, []*coordpb.ChannelCheckpoint{{Vchannel: vch, PchannelTerm: pc.Term,
				Position: &coordpb.Position{Term: pc.Term, Offset: forgedOffset, Timestamp: forgedTimestamp}}})
			switch {
			case err != nil:
				complete(p, err)
			case resp.Accepted > 0:
				p.Ok(fmt.Sprintf("accepted %d", resp.Accepted))
			default:
				p.Fail(fmt.Errorf("refused: %s", strings.Join(resp.Refused, "; ")))
			}
			return true
		}
		segs, err := c.ListSegments(cctx, &coordpb.ListSegmentsRequest{Vchannel: vch, State: "Growing"})
		if err != nil || len(segs) == 0 {
			return false
		}
		seg := segs[rng.IntN(len(segs))]
		in.Segment = seg.SegmentId
		p := cfg.Recorder.Invoke(cfg.ClientID, HostilePrefix+kind, in)
		_, err = c.SaveBinlogPaths(cctx, &coordpb.SaveBinlogPathsRequest{NodeId: pc.NodeId, Vchannel: vch, PchannelTerm: pc.Term,
			SegmentId: seg.SegmentId, CollectionId: seg.CollectionId, PartitionId: seg.PartitionId, Flushed: true,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: forgedLogID, EntriesNum: 1000,
				TimestampFrom: 1, TimestampTo: 2, MemorySize: 1, Path: fmt.Sprintf("forged/%d", seg.SegmentId)}}}},
			RequestId: fmt.Sprintf("hostile-%d-%d", cfg.Seed, rng.Uint64())})
		complete(p, err)
		return true
	case ForgeAck:
		if len(st.pending) == 0 {
			return false
		}
		b := st.pending[rng.IntN(len(st.pending))]
		acked := map[string]bool{}
		for _, a := range b.Acked {
			acked[a.Vchannel] = true
		}
		var open []string
		for _, v := range b.Vchannels {
			if !acked[v] {
				open = append(open, v)
			}
		}
		if len(open) == 0 {
			return false
		}
		vch := pick(open)
		pc, node, ok := owner(pchannelOf(vch))
		if !ok {
			return false
		}
		p := cfg.Recorder.Invoke(cfg.ClientID, HostilePrefix+kind, ForgedIn{Cred: cred.Name, Target: vch, Node: node.Id, Term: pc.Term, ID: b.BroadcastId})
		complete(p, c.Ack(cctx, b.BroadcastId, node.Id, node.Epoch, []*coordpb.Checkpoint{{Vchannel: vch, Term: pc.Term,
			Offset: forgedOffset, TimeTick: forgedTimestamp}}))
		return true
	case ForgeRemove:
		var names []string
		for n, pc := range st.pchannels {
			if pc.State == "ASSIGNED" {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			return false
		}
		pc, node, ok := owner(pick(names))
		if !ok {
			return false
		}
		conn, err := cred.DialNode(node.Address)
		if err != nil {
			return false
		}
		defer conn.Close()
		rctx, rcancel := context.WithTimeout(ctx, removeCallLimit)
		defer rcancel()
		p := cfg.Recorder.Invoke(cfg.ClientID, HostilePrefix+kind, ForgedIn{Cred: cred.Name, Target: pc.Name, Node: node.Id, Term: pc.Term})
		_, err = coordpb.NewStreamingNodeServiceClient(conn).Remove(rctx, &coordpb.RemoveRequest{Pchannel: pc.Name, Term: pc.Term,
			CoordTerm: st.coordTerm, NodeId: node.Id, Epoch: node.Epoch})
		if s, ok := status.FromError(err); ok && s.Code() == codes.Unavailable && strings.Contains(s.Message(), "refused") {
			p.Fail(err) // the node answered: coordd has not decided this removal
			return true
		}
		complete(p, err)
		return true
	}
	return false
}

// complete records a forged call's answer: nil is accepted (ok), a
// definite refusal is fail, a lost answer info.
func complete(p *history.Pending, err error) {
	if err == nil {
		p.Ok("accepted")
		return
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || client.IsOutcomeUnknown(err) {
		p.Info(err)
		return
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unknown, codes.Internal:
		p.Info(err)
	default:
		p.Fail(err)
	}
}

// observeOwners records, every observeInterval, each PChannel's owner as
// coordd says and whether that node's own status holds its WAL at that
// term. An observation whose coordd read failed is not recorded; a node
// that does not answer holds nothing.
func observeOwners(ctx context.Context, cfg HostileConfig) {
	reader, err := client.New(ctx, cfg.Observer.Config(client.Config{Endpoints: cfg.Endpoints, RequestTimeout: time.Second,
		AttemptTimeout: 500 * time.Millisecond}))
	if err != nil {
		return
	}
	defer reader.Close()
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for sleep(ctx, observeInterval) {
		p := cfg.Recorder.Invoke(cfg.ClientID+1, FOwners, nil)
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		pcs, err := reader.ListPChannels(rctx, coordpb.ReadConsistency_STALE)
		cancel()
		if err != nil {
			p.Info(err)
			continue
		}
		held := map[string]map[string]int64{} // address -> pchannel -> term
		view := OwnerView{}
		for _, pc := range pcs.Pchannels {
			s := OwnerState{State: pc.State, Node: pc.NodeId, Term: pc.Term}
			if pc.State == "ASSIGNED" && pc.NodeAddress != "" {
				wals, ok := held[pc.NodeAddress]
				if !ok {
					wals = nodeWALs(ctx, cfg.Observer, conns, pc.NodeAddress)
					held[pc.NodeAddress] = wals
				}
				t, ok := wals[pc.Name]
				s.Held = ok && t == pc.Term
			}
			view[pc.Name] = s
		}
		p.Ok(view)
	}
}

// nodeWALs asks the streaming node at addr which WALs it holds.
func nodeWALs(ctx context.Context, cred HostileCred, conns map[string]*grpc.ClientConn, addr string) map[string]int64 {
	out := map[string]int64{}
	conn := conns[addr]
	if conn == nil {
		var err error
		if conn, err = cred.DialNode(addr); err != nil {
			return out
		}
		conns[addr] = conn
	}
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	st, err := coordpb.NewStreamingNodeServiceClient(conn).Status(sctx, &coordpb.NodeStatusRequest{})
	if err != nil {
		return out
	}
	for _, w := range st.Wals {
		out[w.Pchannel] = w.Term
	}
	return out
}
