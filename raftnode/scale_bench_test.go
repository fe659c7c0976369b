package raftnode_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/testutil"
)

// BenchmarkCatchUpScale measures, for a large state, what a real cluster
// pays on this machine: a member seeded with the state (the raft snapshot
// restored when it opens), the leader's raft snapshot of it (persist
// through the file snapshot store), and two new members joining with empty
// data dirs, each catching up through InstallSnapshot over the TCP
// transport onto BoltDB. The second joiner joins a cluster that keeps its
// quorum meanwhile, as a replacement member does. Run with -benchtime=1x;
// the figures are in bench/RESULTS.md and docs/scaling.md.
func BenchmarkCatchUpScale(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("segments=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				benchCatchUp(b, fsm.SyntheticShape{Segments: n, Tombstones: 8192})
			}
		})
	}
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func benchCatchUp(b *testing.B, shape fsm.SyntheticShape) {
	st, err := fsm.Synthetic(shape)
	if err != nil {
		b.Fatal(err)
	}
	index := st.AppliedIndex()
	body := filepath.Join(b.TempDir(), "state.snap")
	f, err := os.Create(body)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := st.WriteSnapshot(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	st = nil
	h0 := testutil.LiveHeap()

	cfg := func(id string) raftnode.Config {
		return raftnode.Config{ID: id, DataDir: filepath.Join(b.TempDir(), id), RaftAddr: freeAddr(b), Logger: testLogger(b, id)}
	}
	c0 := cfg("n0")
	f, err = os.Open(body)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := datadir.RestoreDataDir(datadir.RestoreConfig{Dir: c0.DataDir, ID: c0.ID, RaftAddr: c0.RaftAddr,
		Body: bufio.NewReaderSize(f, 1<<20), Index: index, Term: 1}); err != nil {
		b.Fatal(err)
	}
	f.Close()

	start, cpu := time.Now(), testutil.CPUTime()
	n0, err := raftnode.Open(c0)
	if err != nil {
		b.Fatal(err)
	}
	defer n0.Shutdown()
	openRestore, openCPU := time.Since(start), testutil.CPUTime()-cpu
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for n0.EstablishedTerm() == 0 {
		if ctx.Err() != nil {
			b.Fatal("n0 never established itself as leader")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := n0.State().SegmentCount(); got != shape.Segments {
		b.Fatalf("n0 restored %d segments, want %d", got, shape.Segments)
	}
	start, cpu = time.Now(), testutil.CPUTime()
	if err := n0.Snapshot(); err != nil {
		b.Fatal(err)
	}
	persist, persistCPU := time.Since(start), testutil.CPUTime()-cpu

	nodes := []*raftnode.Node{n0}
	// leader is whichever member leads now: on a loaded machine a join can
	// cost an election.
	leader := func() *raftnode.Node {
		for ctx.Err() == nil {
			for _, n := range nodes {
				if n.IsLeader() && n.EstablishedTerm() > 0 {
					return n
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Fatal("no established leader")
		return nil
	}
	var cpus []time.Duration // CPU time of each join (all three members)
	join := func(c raftnode.Config) (*raftnode.Node, time.Duration) {
		n, err := raftnode.Open(c)
		if err != nil {
			b.Fatal(err)
		}
		if err := n.SetClusterID(n0.ClusterID()); err != nil {
			b.Fatal(err)
		}
		start, cpu := time.Now(), testutil.CPUTime()
		if err := leader().AddVoter(c.ID, c.RaftAddr); err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
		if err := n.WaitApplied(ctx, leader().State().AppliedIndex()); err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		cpus = append(cpus, testutil.CPUTime()-cpu)
		if got := n.State().SegmentCount(); got != shape.Segments {
			b.Fatalf("%s caught up with %d segments, want %d", c.ID, got, shape.Segments)
		}
		return n, took
	}
	n1, first := join(cfg("n1"))
	defer n1.Shutdown()
	n2, second := join(cfg("n2"))
	defer n2.Shutdown()
	// The cluster commits after the joins (the state is live on all three);
	// a lost leadership is retried on the next leader (same request ID).
	for {
		_, err := propose(ctx, leader(), &logpb.ReserveIDs{Count: 1}, "after-join")
		if err == nil {
			break
		}
		if !retryable(err) || ctx.Err() != nil {
			b.Fatal(err)
		}
	}
	h1 := testutil.LiveHeap()
	fi, err := os.Stat(body)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "snapshot-MiB")
	b.ReportMetric(openRestore.Seconds(), "open-restore-s")
	b.ReportMetric(persist.Seconds(), "raft-persist-s")
	b.ReportMetric(first.Seconds(), "join1-catchup-s")
	b.ReportMetric(second.Seconds(), "join2-catchup-s")
	b.ReportMetric(openCPU.Seconds(), "open-restore-cpu-s")
	b.ReportMetric(persistCPU.Seconds(), "raft-persist-cpu-s")
	b.ReportMetric(cpus[0].Seconds(), "join1-cpu-s")
	b.ReportMetric(cpus[1].Seconds(), "join2-cpu-s")
	b.ReportMetric(float64(h1-h0)/3/(1<<20), "heap-MiB/node")
	// The seeded member's first election makes term 2 (RestoreDataDir
	// records term 1); every later one is an election the joins caused.
	term, _ := strconv.Atoi(leader().Raft().Stats()["term"])
	b.ReportMetric(float64(term-2), "extra-elections")
}
