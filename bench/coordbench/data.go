package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/cluster"
)

// dataCollection is the collection the write-path workloads use.
const dataCollection = 4242

// owned is one VChannel with its owner's (node, PChannel term).
type owned struct {
	vchannel string
	node     uint64
	term     int64
}

// dataSetup allocates the collection's VChannels (one per PChannel) and
// waits until every one's PChannel is ASSIGNED, returning the owners.
func dataSetup(l *cluster.Launcher, shards uint32) ([]owned, error) {
	c, err := newClient(l)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := waitSettled(c, 0, 30*time.Second); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vchs, err := c.AllocVirtualChannels(ctx, dataCollection, shards, "")
	if err != nil {
		return nil, err
	}
	pcs, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		return nil, err
	}
	byName := map[string]*coordpb.PChannel{}
	for _, p := range pcs.Pchannels {
		byName[p.Name] = p
	}
	var out []owned
	for _, v := range vchs {
		for name, p := range byName {
			if len(v) > len(name) && v[:len(name)+1] == name+"_" && p.State == "ASSIGNED" {
				out = append(out, owned{vchannel: v, node: p.NodeId, term: p.Term})
			}
		}
	}
	if len(out) != len(vchs) {
		return nil, fmt.Errorf("found owners for %d of %d vchannels", len(out), len(vchs))
	}
	return out, nil
}

// appliedIndex is the leader's applied index.
func appliedIndex(conn *grpc.ClientConn) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := coordpb.NewClusterClient(conn).Status(ctx, &coordpb.StatusRequest{})
	if err != nil {
		return 0, err
	}
	return st.AppliedIndex, nil
}

// dataLoad runs the "assign" (AssignSegmentID, 1 row of 1 KiB per call) or
// "timeticks" (ReportTimeTicks of every VChannel, ticks always growing)
// workload closed-loop against the leader, and counts the raft log entries
// applied meanwhile, next to the entries applied in an idle period of the
// same length (the streaming node's own checkpoint traffic).
func dataLoad(l *cluster.Launcher, workload string, clients, nconns int, duration time.Duration) (result, error) {
	vchs, err := dataSetup(l, uint32(len(l.StreamingNodes())*4))
	if err != nil {
		return result{}, err
	}
	li, err := leader(l, -1)
	if err != nil {
		return result{}, err
	}
	conns := make([]*grpc.ClientConn, nconns)
	for i := range conns {
		if conns[i], err = dial(l.Members()[li].GRPCAddr); err != nil {
			return result{}, err
		}
		defer conns[i].Close()
	}
	var tick atomic.Uint64
	tick.Store(uint64(time.Now().UnixMilli()) << 18)
	call := func(ctx context.Context, dc coordpb.DataCoordClient, i int) error {
		v := vchs[i%len(vchs)]
		if workload == "assign" {
			_, err := dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: v.node, Requests: []*coordpb.SegmentIDRequest{
				{CollectionId: dataCollection, PartitionId: 1, Vchannel: v.vchannel, PchannelTerm: v.term, Rows: 1, Bytes: 1024}}})
			return err
		}
		t := tick.Add(1)
		req := &coordpb.ReportTimeTicksRequest{NodeId: v.node}
		for _, o := range vchs {
			if o.node == v.node {
				req.Ticks = append(req.Ticks, &coordpb.ChannelTimeTick{Vchannel: o.vchannel, PchannelTerm: o.term, TimeTick: t})
			}
		}
		_, err := dc.ReportTimeTicks(ctx, req)
		return err
	}
	runFor := func(d time.Duration) ([]time.Duration, int, time.Duration) {
		var mu sync.Mutex
		var lats []time.Duration
		errs := 0
		var wg sync.WaitGroup
		start := time.Now()
		stopAt := start.Add(d)
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dc := coordpb.NewDataCoordClient(conns[c%len(conns)])
				local := make([]time.Duration, 0, 4096)
				localErrs := 0
				for i := c; time.Now().Before(stopAt); i += clients {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					t0 := time.Now()
					err := call(ctx, dc, i)
					cancel()
					if err != nil {
						if localErrs == 0 && c == 0 {
							fmt.Fprintf(os.Stderr, "coordbench: %s: first error: %v\n", workload, err)
						}
						localErrs++
						continue
					}
					local = append(local, time.Since(t0))
				}
				mu.Lock()
				lats = append(lats, local...)
				errs += localErrs
				mu.Unlock()
			}()
		}
		wg.Wait()
		return lats, errs, time.Since(start)
	}
	runFor(time.Second) // warm-up
	idle0, err := appliedIndex(conns[0])
	if err != nil {
		return result{}, err
	}
	time.Sleep(duration)
	idle1, _ := appliedIndex(conns[0])
	lats, errs, elapsed := runFor(duration)
	end, err := appliedIndex(conns[0])
	if err != nil {
		return result{}, err
	}
	if len(lats) == 0 {
		return result{}, fmt.Errorf("%s: no call succeeded (%d errors)", workload, errs)
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	pct := func(p float64) float64 {
		return float64(lats[min(len(lats)-1, int(p*float64(len(lats))))].Microseconds()) / 1000
	}
	return result{Clients: clients, Ops: len(lats), Errors: errs, OpsPerSec: float64(len(lats)) / elapsed.Seconds(),
		P50ms: pct(0.50), P99ms: pct(0.99), LogEntries: int64(end - idle1), IdleLogEntries: int64(idle1 - idle0)}, nil
}
