package streamingnode

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/streamingnode/wal"
	"github.com/coordd/coordd/vocab"
)

// Node is a running streaming node: it serves StreamingNodeService, keeps
// a session with coordd (register, heartbeat, follow the assignment stream)
// and holds the WALs coordd assigned to it.
type Node struct {
	cfg  Config
	log  hclog.Logger
	lis  net.Listener
	addr string
	srv  *grpc.Server
	pool *coordPool
	tso  *tso

	mu           sync.Mutex
	nodeID       uint64
	epoch        uint64
	incarnation  string
	seen         *coordpb.Version
	liveNodes    map[uint64]string      // from the assignment stream: node ID -> state (UP, DRAINING)
	view         map[string]viewChannel // from the assignment stream: pchannel -> term and node
	maxCoordTerm uint64                 // the newest coordinator term coordd confirmed
	viewCh       chan struct{}          // closed (and replaced) when the view or maxCoordTerm changes
	hbKick       chan struct{}          // asks the heartbeat loop to heartbeat now
	slots        map[string]*slot
	dp           dataPath // write path and flusher (datapath.go)
	metrics      *metricsServer
	draining     bool // controlled shutdown under way: do not register again
	registered   chan struct{}
	regOnce      sync.Once

	sessCtx    context.Context // register + heartbeat loop
	sessCancel context.CancelFunc
	sessDone   chan struct{}
	bgCtx      context.Context // watch loop, Read streams
	bgCancel   context.CancelFunc
	killCtx    context.Context // cut a controlled shutdown short
	killCancel context.CancelFunc
	wg         sync.WaitGroup

	shutOnce   sync.Once
	finishOnce sync.Once
	done       chan struct{}
}

// slot is one PChannel's WAL on this node. Its mutex serializes lifecycle
// calls and appends for the PChannel.
type slot struct {
	mu   sync.Mutex
	w    *wal.Writer // nil: not held
	term int64
	mode string
	// removedUpTo is the highest term a Remove named: lifecycle requests
	// are ordered by term, so a late Assign at or below it is refused.
	removedUpTo int64
}

// Start listens, starts serving and starts the session with coordd in the
// background (WaitRegistered waits for it).
func Start(cfg Config) (*Node, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.WALDir, 0o755); err != nil {
		return nil, fmt.Errorf("streamingnode: WAL directory: %w", err)
	}
	lis := cfg.Listener
	if lis == nil {
		var err error
		if lis, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("streamingnode: listen: %w", err)
		}
	}
	addr := cfg.Addr
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" || port == "" {
		addr = lis.Addr().String()
	}
	pool, err := newCoordPool(cfg.Coord, client.TransportOptions(cfg.CoordTLS, cfg.CoordToken)...)
	if err != nil {
		lis.Close()
		return nil, err
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger, lis: lis, addr: addr, pool: pool,
		tso:        &tso{pool: pool, batch: cfg.TimestampBatch, timeout: cfg.RPCTimeout},
		slots:      map[string]*slot{},
		viewCh:     make(chan struct{}),
		hbKick:     make(chan struct{}, 1),
		registered: make(chan struct{}),
		sessDone:   make(chan struct{}),
		done:       make(chan struct{}),
	}
	n.sessCtx, n.sessCancel = context.WithCancel(context.Background())
	n.bgCtx, n.bgCancel = context.WithCancel(context.Background())
	n.killCtx, n.killCancel = context.WithCancel(context.Background())
	sopts := []grpc.ServerOption{grpc.MaxRecvMsgSize(wal.MaxPayloadBytes + 1<<20), grpc.WaitForHandlers(true),
		grpc.MaxHeaderListSize(vocab.MaxGRPCHeaderListBytes)} // bounded before any identity check
	if cfg.ServeTLS != nil {
		sopts = append(sopts, grpc.Creds(credentials.NewTLS(cfg.ServeTLS)))
	}
	n.srv = grpc.NewServer(sopts...)
	coordpb.RegisterStreamingNodeServiceServer(n.srv, &service{n: n})
	n.logPreviousIdentity()
	n.log.Info("streaming node starting", "addr", addr, "wal_dir", cfg.WALDir, "coord", cfg.Coord, "tls", cfg.ServeTLS != nil)
	if err := n.startFlusher(n.bgCtx); err != nil {
		lis.Close()
		pool.close()
		return nil, fmt.Errorf("streamingnode: flusher: %w", err)
	}
	if err := n.startMetrics(); err != nil {
		n.bgCancel()
		n.wg.Wait()
		n.closeDataPath()
		lis.Close()
		pool.close()
		return nil, fmt.Errorf("streamingnode: %w", err)
	}
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		if err := n.srv.Serve(lis); err != nil {
			n.log.Error("gRPC server stopped", "error", err)
		}
	}()
	go func() {
		defer n.wg.Done()
		n.watchLoop(n.bgCtx)
	}()
	go func() {
		defer close(n.sessDone)
		n.sessionLoop(n.sessCtx)
	}()
	return n, nil
}

// Run starts a node and runs it until ctx ends, then shuts it down in a
// controlled way (drain, deregister, close).
func Run(ctx context.Context, cfg Config) error {
	n, err := Start(cfg)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-n.done:
	}
	return n.Shutdown(context.Background())
}

// Addr is the address the node serves on and registered with coordd.
func (n *Node) Addr() string { return n.addr }

// Session returns the node's current registration (0, 0 before the first
// one and while registering again).
func (n *Node) Session() (nodeID, epoch uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodeID, n.epoch
}

// WaitRegistered waits until the node has registered with coordd once.
func (n *Node) WaitRegistered(ctx context.Context) error {
	select {
	case <-n.registered:
		return nil
	case <-n.done:
		return fmt.Errorf("streamingnode: stopped before registering")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed once the node has stopped.
func (n *Node) Done() <-chan struct{} { return n.done }

// Status describes the node: its session, the highest coordinator term it
// has seen, the WALs it holds and the assignment version it has seen.
func (n *Node) Status() *coordpb.NodeStatusResponse {
	n.mu.Lock()
	resp := &coordpb.NodeStatusResponse{NodeId: n.nodeID, Epoch: n.epoch, Address: n.addr,
		MaxCoordTerm: n.maxCoordTerm}
	if n.seen != nil {
		resp.SeenVersion = proto.Clone(n.seen).(*coordpb.Version)
	}
	names := make([]string, 0, len(n.slots))
	for p := range n.slots {
		names = append(names, p)
	}
	slots := make([]*slot, len(names))
	sort.Strings(names)
	for i, p := range names {
		slots[i] = n.slots[p]
	}
	n.mu.Unlock()
	for i, s := range slots {
		s.mu.Lock()
		if s.w != nil {
			resp.Wals = append(resp.Wals, &coordpb.WALStatus{Pchannel: names[i], Term: s.term, AccessMode: s.mode,
				NextOffset: s.w.NextOffset()})
		}
		s.mu.Unlock()
	}
	return resp
}

// Shutdown is the controlled shutdown: ask coordd to drain the node, wait
// (at most Config.DrainTimeout, or until ctx ends) until it holds no
// channels, deregister, stop serving and close the WALs. Calling it again
// waits for the first call.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutOnce.Do(func() {
		n.mu.Lock()
		n.draining = true
		id, epoch := n.nodeID, n.epoch
		n.mu.Unlock()
		dctx, cancel := context.WithTimeout(ctx, n.cfg.DrainTimeout)
		stop := context.AfterFunc(n.killCtx, cancel)
		if id != 0 {
			n.drain(dctx, id, epoch)
		}
		n.sessCancel()
		<-n.sessDone
		if id, epoch = n.Session(); id != 0 {
			n.deregister(dctx, id, epoch)
		}
		stop()
		cancel()
		n.finish(false)
	})
	<-n.done
	return nil
}

// Kill stops the node at once, without draining or deregistering (as if
// the process died; coordd notices when heartbeats stop).
func (n *Node) Kill() {
	n.killCancel()
	n.finish(true)
}

// finish stops every loop and the server and closes the WALs.
func (n *Node) finish(hard bool) {
	n.finishOnce.Do(func() {
		n.sessCancel()
		n.bgCancel()
		n.stopMetrics()
		if hard {
			n.srv.Stop()
		} else {
			stopped := make(chan struct{})
			go func() { n.srv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				n.srv.Stop()
			}
		}
		<-n.sessDone
		n.wg.Wait()
		n.closeDataPath()
		n.closeAllWALs("node stopped")
		n.pool.close()
		n.log.Info("streaming node stopped")
		close(n.done)
	})
	<-n.done
}

// watchLoop follows Channels.WatchAssignments on any coordd member,
// reconnecting (to the next member, after 50 ms) when the stream breaks. It
// keeps only versions strictly newer than the one it holds.
func (n *Node) watchLoop(ctx context.Context) {
	failures := 0
	for {
		i, conn := n.pool.pick()
		n.mu.Lock()
		req := &coordpb.WatchAssignmentsRequest{}
		if n.seen != nil {
			req.FromVersion = proto.Clone(n.seen).(*coordpb.Version)
		}
		n.mu.Unlock()
		stream, err := coordpb.NewChannelsClient(conn).WatchAssignments(ctx, req)
		for err == nil {
			var upd *coordpb.AssignmentUpdate
			if upd, err = stream.Recv(); err == nil {
				n.onAssignment(upd)
				failures = 0
			}
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		if failures <= 3 || failures%100 == 0 {
			n.log.Debug("assignment stream broke; reconnecting", "endpoint", n.pool.addrs[i], "error", err)
		}
		n.pool.failed(i)
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return
		}
	}
}

func (n *Node) onAssignment(upd *coordpb.AssignmentUpdate) {
	if upd.Version == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seen != nil && !versionLess(n.seen, upd.Version) {
		return
	}
	n.seen = proto.Clone(upd.Version).(*coordpb.Version)
	n.applyViewLocked(upd)
	if upd.Full || n.liveNodes == nil {
		n.liveNodes = map[uint64]string{}
	}
	for _, sn := range upd.Nodes {
		if sn.State == "DOWN" {
			delete(n.liveNodes, sn.Id)
		} else {
			n.liveNodes[sn.Id] = sn.State
		}
	}
	if n.log.IsDebug() {
		var mine []string
		for _, c := range upd.Channels {
			if c.NodeId == n.nodeID && n.nodeID != 0 {
				mine = append(mine, fmt.Sprintf("%s@%d:%s", c.Pchannel, c.Term, c.State))
			}
		}
		n.log.Debug("assignment update", "version", fmtVersion(upd.Version), "full", upd.Full, "mine", mine)
	}
}

// ---- WALs ----

// slotFor returns pchannel's slot, creating it when create is set.
func (n *Node) slotFor(pchannel string, create bool) *slot {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.slots[pchannel]
	if s == nil && create {
		s = &slot{}
		n.slots[pchannel] = s
	}
	return s
}

func (n *Node) closeAllWALs(why string) {
	n.mu.Lock()
	slots := make(map[string]*slot, len(n.slots))
	for p, s := range n.slots {
		slots[p] = s
	}
	n.mu.Unlock()
	for p, s := range slots {
		s.mu.Lock()
		if s.w != nil {
			n.log.Info("closing WAL", "pchannel", p, "term", s.term, "reason", why)
			s.close()
		}
		s.mu.Unlock()
	}
}

// close drops the slot's writer. The caller holds s.mu.
func (s *slot) close() {
	if s.w != nil {
		s.w.Close()
	}
	s.w, s.term, s.mode = nil, 0, ""
}

// ---- identity (for logs only) ----

type identity struct {
	NodeID       uint64 `json:"node_id"`
	Epoch        uint64 `json:"epoch"`
	Incarnation  string `json:"incarnation"`
	Address      string `json:"address"`
	RegisteredAt string `json:"registered_at"`
}

func (n *Node) identityPath() string { return filepath.Join(n.cfg.DataDir, "identity.json") }

func (n *Node) logPreviousIdentity() {
	if n.cfg.DataDir == "" {
		return
	}
	data, err := os.ReadFile(n.identityPath())
	if err != nil {
		return
	}
	var id identity
	if json.Unmarshal(data, &id) == nil {
		n.log.Info("previous run", "node_id", id.NodeID, "epoch", id.Epoch, "incarnation", id.Incarnation,
			"address", id.Address, "registered_at", id.RegisteredAt)
	}
}

func (n *Node) saveIdentity(id, epoch uint64, inc string) {
	if n.cfg.DataDir == "" {
		return
	}
	data, _ := json.MarshalIndent(identity{NodeID: id, Epoch: epoch, Incarnation: inc, Address: n.addr,
		RegisteredAt: time.Now().UTC().Format(time.RFC3339Nano)}, "", "  ")
	tmp := n.identityPath() + ".tmp"
	err := os.MkdirAll(n.cfg.DataDir, 0o755)
	if err == nil {
		err = os.WriteFile(tmp, append(data, '\n'), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, n.identityPath())
	}
	if err != nil {
		n.log.Warn("could not record identity in the data directory", "error", err)
	}
}
