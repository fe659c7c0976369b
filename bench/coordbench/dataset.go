package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// The write-path workloads (w2, w3, w4) share one data set per system:
// 1,000 VChannels (collections of 16 shards over the 16 PChannels), each
// with one growing segment, and each client works on its own VChannels
// (index % clients == client) so that a VChannel's positions only grow.

const dataVChannels = 1000

type dataVch struct {
	name, pchannel string
	collection     int64
	node           uint64 // the owner at set-up; see dataSet.current
	term           int64
	segment        int64
}

type owner struct {
	node uint64
	term int64
}

type dataSet struct {
	vchs      []dataVch
	manifests bool // w4's first revisions are written
	// owners: PChannel -> its owner as last read; replaced when a call is
	// refused as not the owner (coordd moved a PChannel, e.g. after an
	// election on a loaded machine), at most every 500 ms.
	owners      atomic.Pointer[map[string]owner]
	lastRefresh atomic.Int64
}

// current is v with its PChannel's owner as last read.
func (d *dataSet) current(v dataVch) dataVch {
	if m := d.owners.Load(); m != nil {
		if o, ok := (*m)[v.pchannel]; ok {
			v.node, v.term = o.node, o.term
		}
	}
	return v
}

// refused re-reads the owners when err says the caller is not the owner
// (Aborted, or a refused entry naming the owner), so the following calls
// act for the new owner.
func (d *dataSet) refused(conn *grpc.ClientConn, err error) {
	if err == nil || status.Code(err) != codes.Aborted && !strings.Contains(err.Error(), "owner") {
		return
	}
	now, last := time.Now().UnixMilli(), d.lastRefresh.Load()
	if now-last < 500 || !d.lastRefresh.CompareAndSwap(last, now) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := coordpb.NewChannelsClient(conn).ListPChannels(ctx, &coordpb.ListPChannelsRequest{})
	if err != nil {
		return
	}
	m := map[string]owner{}
	for _, p := range resp.Pchannels {
		if p.State == "ASSIGNED" {
			m[p.Name] = owner{p.NodeId, p.Term}
		}
	}
	d.owners.Store(&m)
}

// positions are hybrid timestamps (physical ms << 18 | logical) from the
// wall clock positionLead ahead, strictly increasing across both systems
// and every cell: ahead of the checkpoints coordd's streaming nodes report
// for the same VChannels from their own WALs, and only growing per
// VChannel. coordd refuses a time tick beyond its committed TSO limit plus
// a slack of 3 s (docs/semantics.md#position-bounds); the limit runs about
// 1-3 s ahead of the clock while timestamps are allocated, which
// keepTimeTicking makes sure of, so a lead of 1 s stays inside the bound.
var positionBase = uint64(time.Now().UnixMilli()) << 18

const positionLead = time.Second

var lastPosition atomic.Uint64

func nextPosition() uint64 {
	for {
		prev := lastPosition.Load()
		next := max(prev+1, uint64(time.Now().Add(positionLead).UnixMilli())<<18)
		if lastPosition.CompareAndSwap(prev, next) {
			return next
		}
	}
}

// mine lists client c's VChannels.
func (d *dataSet) mine(c, clients int) []dataVch {
	var out []dataVch
	for i := c; i < len(d.vchs); i += clients {
		out = append(out, d.vchs[i])
	}
	return out
}

func setupData(s *system) error {
	if s.data != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	ch := coordpb.NewChannelsClient(s.conns[0])
	owners, err := settledOwners(ctx, ch)
	if err != nil {
		return err
	}
	d := &dataSet{}
	for coll := int64(7000); len(d.vchs) < dataVChannels; coll++ {
		n := min(16, dataVChannels-len(d.vchs))
		var resp *coordpb.AllocVirtualChannelsResponse
		err := retry(ctx, func() (err error) {
			resp, err = ch.AllocVirtualChannels(ctx, &coordpb.AllocVirtualChannelsRequest{CollectionId: coll, Count: uint32(n),
				RequestId: fmt.Sprintf("coordbench-vch-%d", coll)})
			return err
		})
		if err != nil {
			return fmt.Errorf("alloc vchannels of collection %d: %w", coll, err)
		}
		for _, v := range resp.Vchannels {
			var p *coordpb.PChannel
			for name, o := range owners {
				if strings.HasPrefix(v, name+"_") {
					p = o
				}
			}
			if p == nil {
				return fmt.Errorf("vchannel %s: no PChannel owner", v)
			}
			d.vchs = append(d.vchs, dataVch{name: v, pchannel: p.Name, collection: coll})
		}
	}
	d.adopt(owners)
	dc := coordpb.NewDataCoordClient(s.conns[0])
	for i := range d.vchs {
		v := &d.vchs[i]
		var resp *coordpb.AssignSegmentIDResponse
		var err error
		for attempt := 0; ; attempt++ {
			err = retry(ctx, func() (err error) {
				resp, err = dc.AssignSegmentID(ctx, &coordpb.AssignSegmentIDRequest{NodeId: v.node, Requests: []*coordpb.SegmentIDRequest{
					{CollectionId: v.collection, PartitionId: 1, Vchannel: v.name, PchannelTerm: v.term, Rows: 1, Bytes: 1024}}})
				return err
			})
			// A streaming node that registered late takes its share of
			// the PChannels while the segments are assigned: follow the
			// owners again (the workloads do the same with refused).
			if status.Code(err) != codes.Aborted || attempt == 20 {
				break
			}
			if owners, err = settledOwners(ctx, ch); err != nil {
				return err
			}
			d.adopt(owners)
		}
		if err != nil {
			return fmt.Errorf("assign a segment on %s: %w", v.name, err)
		}
		v.segment = resp.Assignments[0].SegmentId
	}
	s.data = d
	return nil
}

// settledOwners waits until every PChannel is ASSIGNED and returns them by
// name.
func settledOwners(ctx context.Context, ch coordpb.ChannelsClient) (map[string]*coordpb.PChannel, error) {
	for {
		var resp *coordpb.ListPChannelsResponse
		err := retry(ctx, func() (err error) {
			resp, err = ch.ListPChannels(ctx, &coordpb.ListPChannelsRequest{})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list pchannels: %w", err)
		}
		all := len(resp.Pchannels) > 0
		for _, p := range resp.Pchannels {
			all = all && p.State == "ASSIGNED"
		}
		if all {
			owners := map[string]*coordpb.PChannel{}
			for _, p := range resp.Pchannels {
				owners[p.Name] = p
			}
			return owners, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("pchannels never all ASSIGNED: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// adopt sets every VChannel's owner and term from owners.
func (d *dataSet) adopt(owners map[string]*coordpb.PChannel) {
	for i := range d.vchs {
		if p, ok := owners[d.vchs[i].pchannel]; ok {
			d.vchs[i].node, d.vchs[i].term = p.NodeId, p.Term
		}
	}
}

// retry repeats a setup call answered Unavailable (a leader change on a
// loaded machine), at most 20 times.
func retry(ctx context.Context, call func() error) error {
	var err error
	for range 20 {
		if err = call(); status.Code(err) != codes.Unavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
	return err
}
