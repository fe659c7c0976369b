package main

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// Simulated streaming nodes: one in-process gRPC server listening on one
// loopback address per node. Assign and Remove are accepted at once (no
// WAL is opened); Append and AppendBatch, which coordd's broadcaster sends
// for DDL broadcasts, answer a fresh (term, offset) and a timestamp from
// the clock, which is what the broadcaster records as the target's ack. A
// node registers, then heartbeats at its interval reporting the newest
// assignment version the run's watchers have seen (coordd gives a node
// channels only once it has seen its registration).

type snServer struct {
	coordpb.UnimplementedStreamingNodeServiceServer
	offset  atomic.Uint64
	appends atomic.Int64
}

func (s *snServer) Assign(context.Context, *coordpb.AssignRequest) (*coordpb.AssignResponse, error) {
	return &coordpb.AssignResponse{}, nil
}

func (s *snServer) Remove(context.Context, *coordpb.RemoveRequest) (*coordpb.RemoveResponse, error) {
	return &coordpb.RemoveResponse{}, nil
}

func (s *snServer) answer(req *coordpb.AppendRequest) *coordpb.AppendResponse {
	s.appends.Add(1)
	term := req.Term
	if term < 1 {
		term = 1
	}
	return &coordpb.AppendResponse{Id: &coordpb.MessageID{Term: term, Offset: s.offset.Add(1)},
		Timestamp: uint64(time.Now().UnixMilli()) << 18}
}

func (s *snServer) Append(_ context.Context, req *coordpb.AppendRequest) (*coordpb.AppendResponse, error) {
	return s.answer(req), nil
}

func (s *snServer) AppendBatch(_ context.Context, req *coordpb.AppendBatchRequest) (*coordpb.AppendBatchResponse, error) {
	out := &coordpb.AppendBatchResponse{}
	for _, it := range req.Items {
		out.Results = append(out.Results, &coordpb.AppendBatchResult{Response: s.answer(it)})
	}
	return out, nil
}

// simNodes is the pool of simulated nodes and the run's assignment
// watchers.
type simNodes struct {
	srv   *grpc.Server
	ans   *snServer
	addrs []string
	ids   []uint64
	epoch []uint64

	// seen is the newest assignment version any watcher received
	// (global<<32 | local is not used: the pair is kept under mu).
	mu         sync.Mutex
	seenGlobal uint64
	seenLocal  uint64
	pushes     int64
	// globalSince: when the first update of each Global (established
	// term) arrived at a watcher, for the failover measurement.
	globalSince map[uint64]time.Time
}

func startSimNodes(n int) (*simNodes, error) {
	s := &simNodes{srv: grpc.NewServer(), ans: &snServer{}, globalSince: map[uint64]time.Time{}}
	coordpb.RegisterStreamingNodeServiceServer(s.srv, s.ans)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			s.srv.Stop()
			return nil, fmt.Errorf("sim node listener: %w", err)
		}
		go func() { _ = s.srv.Serve(l) }()
		s.addrs = append(s.addrs, l.Addr().String())
	}
	return s, nil
}

func (s *simNodes) stop() { s.srv.Stop() }

func (s *simNodes) saw(u *coordpb.AssignmentUpdate) {
	v := u.GetVersion()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pushes++
	if _, ok := s.globalSince[v.GetGlobal()]; !ok {
		s.globalSince[v.GetGlobal()] = time.Now()
	}
	if v.GetGlobal() > s.seenGlobal || v.GetGlobal() == s.seenGlobal && v.GetLocal() > s.seenLocal {
		s.seenGlobal, s.seenLocal = v.GetGlobal(), v.GetLocal()
	}
}

func (s *simNodes) seen() *coordpb.Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &coordpb.Version{Global: s.seenGlobal, Local: s.seenLocal}
}

// firstPushAfter is when a watcher first received an update of a Global
// above g (zero time: none yet).
func (s *simNodes) firstPushAfter(g uint64) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var first time.Time
	for k, t := range s.globalSince {
		if k > g && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// watch runs one assignment watcher until ctx ends, re-opening its stream
// on the next connection of conns after an error (a member killed).
func (s *simNodes) watch(ctx context.Context, conns func() []*grpc.ClientConn, start int) {
	for i := start; ctx.Err() == nil; i++ {
		cs := conns()
		c := cs[i%len(cs)]
		st, err := coordpb.NewChannelsClient(c).WatchAssignments(ctx, &coordpb.WatchAssignmentsRequest{})
		if err == nil {
			for {
				u, err := st.Recv()
				if err != nil {
					break
				}
				s.saw(u)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// register registers every node through conn (retrying while the cluster
// has no leader) and returns once all hold IDs.
func (s *simNodes) register(ctx context.Context, conn *grpc.ClientConn) error {
	reg := coordpb.NewStreamingNodeRegistryClient(conn)
	for i, a := range s.addrs {
		var resp *coordpb.RegisterStreamingNodeResponse
		err := retryUnavailable(ctx, func(ctx context.Context) (err error) {
			resp, err = reg.RegisterStreamingNode(ctx, &coordpb.RegisterStreamingNodeRequest{Address: a,
				Incarnation: fmt.Sprintf("scale-sim-%d-%d", i, time.Now().UnixNano())})
			return err
		})
		if err != nil {
			return fmt.Errorf("register sim node %d: %w", i, err)
		}
		s.ids = append(s.ids, resp.NodeId)
		s.epoch = append(s.epoch, resp.Epoch)
	}
	return nil
}

// heartbeat sends node i's heartbeats every interval() until ctx ends,
// through the connections in turn, recording each call in st().
func (s *simNodes) heartbeat(ctx context.Context, i int, conns func() []*grpc.ClientConn, interval func() time.Duration, st func() *opStats) {
	for k := i; ctx.Err() == nil; k++ {
		cs := conns()
		req := &coordpb.HeartbeatRequest{NodeId: s.ids[i], Epoch: s.epoch[i], SeenVersion: s.seen(),
			HeartbeatIntervalMs: interval().Milliseconds()}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		_, err := coordpb.NewStreamingNodeRegistryClient(cs[k%len(cs)]).Heartbeat(cctx, req)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			st().fail(err)
		} else {
			st().ok(time.Since(t0), 1)
		}
		select {
		case <-ctx.Done():
		case <-time.After(interval()):
		}
	}
}

func (s *simNodes) pushCount() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pushes
}
