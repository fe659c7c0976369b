package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

// system is one side of a comparison: where its leader serves gRPC, the
// connections the clients share, and how to read its processes' RSS and
// (coordd only) its raft counters.
type system struct {
	name  string // "coordd" or "peer"
	conns []*grpc.ClientConn
	rss   func() map[string]float64
	// raftCounters: the leader's applied index, its log-store commits
	// (each a bolt transaction: the leader's fsyncs) and the commands it
	// proposed and saw applied (several share an entry); nil for the peer.
	raftCounters func() (applied, storeCommits, commands float64, err error)
	// refresh re-dials the leader when it changed (nil for the peer), so
	// no cell measures coordd through a follower's forwarding hop.
	refresh func() error
	// term is coordd's raft term as its leader answers it (nil for the
	// peer): a cell that ends at a higher term saw an election.
	term func() uint64
	// txns counts the peer's etcd transactions (nil for coordd).
	txns func() (float64, error)
	// data is the write-path setup shared by w2, w3 and w4.
	data *dataSet
	// targets are w5's broadcast targets.
	targets []string
	// watchAddrs: where w6's assignment watchers connect (coordd: one
	// client per member; the peer: three clients to it); leaderAddr: where
	// its simulated streaming nodes' own watcher connects.
	watchAddrs []string
	leaderAddr string
	// churn is w6's state between its setup and teardown.
	churn *churnSet
	// pprofAddr serves /debug/pprof/ for -profile-dir (coordd: the
	// leader's HTTP address, when started with --enable-pprof).
	pprofAddr string
	// followerPprof are the other members' HTTP addresses (coordd only),
	// profiled beside the leader.
	followerPprof []string
	// pids are the coordinator's processes (coordd: the members; the
	// peer: etcdcoord and its etcd members), for CPU seconds per operation.
	pids func() map[string]int
	// round samples every member's raft timers (coordd only; nil for the
	// peer): roundBreakdown of two samples says where a round went.
	round func() roundSample
	// values counts what a counted variant's successful calls carried
	// (w3's checkpoint-batch-128: checkpoints accepted).
	values atomic.Int64
	// stopTicking ends keepTimeTicking.
	stopTicking func()
}

func (s *system) conn(client int) *grpc.ClientConn { return s.conns[client%len(s.conns)] }

func (s *system) close() {
	if s.stopTicking != nil {
		s.stopTicking()
	}
	s.closeConns()
}

func (s *system) closeConns() {
	for _, c := range s.conns {
		c.Close()
	}
}

func dialN(addr string, n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, n)
	for i := range conns {
		c, err := dial(addr)
		if err != nil {
			return nil, err
		}
		conns[i] = c
	}
	return conns, nil
}

// coorddSystem connects to the launched cluster's established leader.
func coorddSystem(l *cluster.Launcher, nconns int) (*system, error) {
	s := &system{name: "coordd"}
	var ld cluster.LocalMember
	s.refresh = func() error {
		li, err := leader(l, -1)
		if err != nil {
			return err
		}
		if l.Members()[li].GRPCAddr == ld.GRPCAddr {
			return nil
		}
		conns, err := dialN(l.Members()[li].GRPCAddr, nconns)
		if err != nil {
			return err
		}
		s.closeConns()
		ld, s.conns = l.Members()[li], conns
		s.leaderAddr, s.pprofAddr = ld.GRPCAddr, ld.HTTPAddr
		s.followerPprof = nil
		for i, m := range l.Members() {
			if i != li {
				s.followerPprof = append(s.followerPprof, m.HTTPAddr)
			}
		}
		return nil
	}
	if err := s.refresh(); err != nil {
		return nil, err
	}
	s.watchAddrs = endpoints(l)
	// RSS comes from /proc, as the peer's does: sampled four times a
	// second during a cell, a /metrics scrape of every member would be
	// CPU charged to coordd's operations that the peer does not pay.
	s.rss = func() map[string]float64 {
		out := map[string]float64{}
		for _, m := range l.Members() {
			if pid := l.Pid(m.ID); pid > 0 {
				out[m.ID] = rssMiB(pid)
			}
		}
		return out
	}
	s.term = func() uint64 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := coordpb.NewClusterClient(s.conns[0]).Status(ctx, &coordpb.StatusRequest{})
		if err != nil {
			return 0
		}
		return st.Term
	}
	s.pids = func() map[string]int {
		out := map[string]int{}
		for _, m := range l.Members() {
			if pid := l.Pid(m.ID); pid > 0 {
				out[m.ID] = pid
			}
		}
		return out
	}
	s.round = func() roundSample { return sampleRound(l, ld.HTTPAddr) }
	s.raftCounters = func() (float64, float64, float64, error) {
		mt, err := scrape(ld.HTTPAddr)
		if err != nil {
			return 0, 0, 0, err
		}
		// One log append per leader store commit whichever log store runs
		// (raft-boltdb's own counter exists only with bolt).
		return mt["coordd_fsm_applied_index"], mt["coordd_raft_log_appends_total"], mt["coordd_propose_duration_seconds_count"], nil
	}
	if err := s.keepTimeTicking(s.leaderAddr); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// peer is the etcd cluster and the etcdcoord process.
type peer struct {
	etcd *etcdCluster
	cmd  *exec.Cmd
	addr string
}

func startPeer(etcdBin, peerBin, dir string, etcdPort, peerPort int, extraArgs []string) (*peer, error) {
	e, err := startEtcd(etcdBin, dir, etcdPort)
	if err != nil {
		return nil, err
	}
	ld, err := e.leader()
	if err != nil {
		e.stop()
		return nil, err
	}
	p := &peer{etcd: e, addr: fmt.Sprintf("127.0.0.1:%d", peerPort)}
	logf, err := os.Create(filepath.Join(dir, "etcdcoord.log"))
	if err != nil {
		e.stop()
		return nil, err
	}
	defer logf.Close()
	// The peer talks to the etcd leader only (no follower forwarding hop):
	// the best case for it.
	args := append([]string{"-listen", p.addr, "-endpoints", ld, "-pchannels", "16",
		"-wal-dir", filepath.Join(dir, "peer-wal"), "-object-store", filepath.Join(dir, "peer-objects")}, extraArgs...)
	p.cmd = exec.Command(peerBin, args...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		e.stop()
		return nil, fmt.Errorf("start etcdcoord: %w", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := dial(p.addr)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			_, err = coordpb.NewClusterClient(c).Status(ctx, &coordpb.StatusRequest{})
			cancel()
			c.Close()
			if err == nil {
				return p, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop()
	return nil, fmt.Errorf("etcdcoord did not answer within 20 s (log: %s)", filepath.Join(dir, "etcdcoord.log"))
}

func (p *peer) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
	p.etcd.stop()
}

func (p *peer) system(nconns int, pprofAddr string) (*system, error) {
	conns, err := dialN(p.addr, nconns)
	if err != nil {
		return nil, err
	}
	s := &system{name: "peer", conns: conns, watchAddrs: []string{p.addr, p.addr, p.addr}, leaderAddr: p.addr, pprofAddr: pprofAddr}
	s.rss = func() map[string]float64 {
		out := map[string]float64{"etcdcoord": rssMiB(p.cmd.Process.Pid)}
		for name, pid := range p.etcd.pids() {
			out[name] = rssMiB(pid)
		}
		return out
	}
	s.pids = func() map[string]int {
		out := map[string]int{"etcdcoord": p.cmd.Process.Pid}
		for name, pid := range p.etcd.pids() {
			out[name] = pid
		}
		return out
	}
	s.txns = func() (float64, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		st, err := coordpb.NewClusterClient(conns[0]).Status(ctx, &coordpb.StatusRequest{})
		if err != nil {
			return 0, err
		}
		return float64(st.AppliedIndex), nil
	}
	if err := s.keepTimeTicking(s.leaderAddr); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// keepTimeTicking allocates one timestamp every 100 ms for as long as the
// system is open, as Milvus's streaming nodes do for their time ticks: the
// TSO's committed limit then keeps its lead over the clock on both sides,
// and the positions the write-path workloads report (nextPosition) are
// timestamps the oracle could have handed out.
// It has a connection of its own, so a cell's re-dial of the leader does
// not end it (a call through a follower is forwarded).
func (s *system) keepTimeTicking(addr string) error {
	conns, err := dialN(addr, 1)
	if err != nil {
		return fmt.Errorf("time ticks: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			call, end := context.WithTimeout(ctx, time.Second)
			_, _ = coordpb.NewAllocatorClient(conns[0]).AllocTimestamp(call, &coordpb.AllocTimestampRequest{Count: 1})
			end()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	s.stopTicking = func() { cancel(); <-done; conns[0].Close() }
	return nil
}
