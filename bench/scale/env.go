package main

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// env is what the load, the faults and the bulk DDL share: the members,
// the simulated nodes, the seeded state's channels, and the PChannel
// owners as last read (a call refused as not the owner re-reads them).
type env struct {
	members []*member
	mu      sync.Mutex // guards members (a replaced member) and leaderIdx
	leadIdx int
	sn      *simNodes
	seed    *seedInfo
	objects string

	owners   atomic.Pointer[ownerView]
	lastRead atomic.Int64

	logID atomic.Int64 // binlog IDs the load writes

	// The simulated nodes heartbeat for the whole run (a silent node
	// loses its channels): at hbInterval, each call recorded in hbStats
	// (the row's while a row runs). baseWatchers assignment watchers stay
	// open for the whole run.
	hbInterval   atomic.Int64
	hbStats      atomic.Pointer[opStats]
	baseWatchers int
}

// startBackground starts the nodes' heartbeats and the base watchers.
func (e *env) startBackground(ctx context.Context, watchers int) {
	e.hbInterval.Store(int64(time.Second))
	e.hbStats.Store(&opStats{})
	e.baseWatchers = watchers
	for i := range e.sn.ids {
		go e.sn.heartbeat(ctx, i, e.conns, func() time.Duration { return time.Duration(e.hbInterval.Load()) }, e.hbStats.Load)
	}
	for i := range watchers {
		go e.sn.watch(ctx, e.conns, i)
	}
}

// ownerView: each PChannel's owner, and the VChannels of each owner.
type ownerView struct {
	byPChannel map[string]owner
	byNode     map[uint64][]string // VChannels, sorted
	nodes      []uint64
	cursor     []atomic.Int64 // per node index: next checkpoint window
}

type owner struct {
	node uint64
	term int64
}

func (e *env) running() []*member {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*member
	for _, m := range e.members {
		if m.running() {
			out = append(out, m)
		}
	}
	return out
}

func (e *env) conns() []*grpc.ClientConn {
	var out []*grpc.ClientConn
	for _, m := range e.running() {
		out = append(out, m.conn)
	}
	if len(out) == 0 {
		out = append(out, e.members[0].conn)
	}
	return out
}

// leader finds the member that is the established leader now, waiting up
// to timeout; the load sends to it (a follower would forward).
func (e *env) leader(ctx context.Context, timeout time.Duration) (*member, *coordpb.StatusResponse, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range e.running() {
			st, err := m.status(ctx)
			if err == nil && st.State == "Leader" && st.EstablishedTerm == st.Term {
				e.mu.Lock()
				for i, x := range e.members {
					if x == m {
						e.leadIdx = i
					}
				}
				e.mu.Unlock()
				return m, st, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("no established leader within %v", timeout)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaderConn is the connection to the member last found leading.
func (e *env) leaderConn() *grpc.ClientConn {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.members[e.leadIdx].conn
}

// maxTerm is the highest raft term any running member reports (elections
// are counted as its increase).
func (e *env) maxTerm(ctx context.Context) uint64 {
	var t uint64
	for _, m := range e.running() {
		if st, err := m.status(ctx); err == nil {
			t = max(t, st.Term)
		}
	}
	return t
}

// readOwners reads the PChannel owners and regroups the seeded VChannels
// by owner (at most every 500 ms unless force).
func (e *env) readOwners(ctx context.Context, force bool) error {
	now, last := time.Now().UnixMilli(), e.lastRead.Load()
	if !force && (now-last < 500 || !e.lastRead.CompareAndSwap(last, now)) {
		return nil
	}
	e.lastRead.Store(now)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := coordpb.NewChannelsClient(e.leaderConn()).ListPChannels(ctx, &coordpb.ListPChannelsRequest{})
	if err != nil {
		return fmt.Errorf("list pchannels: %w", err)
	}
	v := &ownerView{byPChannel: map[string]owner{}, byNode: map[uint64][]string{}}
	probe := e.probeVChannel()
	for _, p := range resp.Pchannels {
		if p.State != "ASSIGNED" {
			continue
		}
		v.byPChannel[p.Name] = owner{p.NodeId, p.Term}
		for _, vch := range e.seed.ByPChannel[p.Name] {
			if vch != probe {
				v.byNode[p.NodeId] = append(v.byNode[p.NodeId], vch)
			}
		}
	}
	for n, l := range v.byNode {
		if len(l) == 0 {
			delete(v.byNode, n)
			continue
		}
		sort.Strings(l)
		v.nodes = append(v.nodes, n)
	}
	sort.Slice(v.nodes, func(i, j int) bool { return v.nodes[i] < v.nodes[j] })
	v.cursor = make([]atomic.Int64, len(v.nodes))
	e.owners.Store(v)
	return nil
}

// waitAssigned waits until every PChannel is ASSIGNED.
func (e *env) waitAssigned(ctx context.Context, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := e.readOwners(ctx, true)
		if v := e.owners.Load(); err == nil && v != nil && len(v.byPChannel) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			n := 0
			if v := e.owners.Load(); v != nil {
				n = len(v.byPChannel)
			}
			return fmt.Errorf("%d of %d PChannels ASSIGNED after %v (last error: %v)", n, want, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func (e *env) ownerOf(vch string) (owner, bool) {
	v := e.owners.Load()
	if v == nil {
		return owner{}, false
	}
	o, ok := v.byPChannel[vocab.PChannelOf(vch)]
	return o, ok
}

// refused re-reads the owners when err says the caller is not the owner.
func (e *env) refused(ctx context.Context, err error) {
	if err == nil {
		return
	}
	if status.Code(err) == codes.Aborted || strings.Contains(err.Error(), "owner") {
		_ = e.readOwners(ctx, false)
	}
}

// retryUnavailable repeats call while the answer is Unavailable (no
// leader for a moment), for up to 60 s.
func retryUnavailable(ctx context.Context, call func(context.Context) error) error {
	return retryCodes(ctx, call, codes.Unavailable, codes.DeadlineExceeded)
}

// retryOwnerMoves is retryUnavailable for a setup call made as a
// PChannel's owner: Aborted (not the owner) is retried too, since an
// election during setup may move PChannels and the simulated nodes learn
// the new owner from the next assignment push.
func retryOwnerMoves(ctx context.Context, call func(context.Context) error) error {
	return retryCodes(ctx, call, codes.Unavailable, codes.DeadlineExceeded, codes.Aborted)
}

func retryCodes(ctx context.Context, call func(context.Context) error, retry ...codes.Code) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := call(cctx)
		cancel()
		if err == nil || !slices.Contains(retry, status.Code(err)) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// positions are hybrid timestamps from the clock one second ahead, only
// growing: within the committed TSO window (a restored cluster's starts a
// minute ahead of the clock) and above every seeded position.
var lastPosition atomic.Uint64

func nextPosition() uint64 {
	for {
		prev := lastPosition.Load()
		next := max(prev+1, uint64(time.Now().Add(time.Second).UnixMilli())<<18)
		if lastPosition.CompareAndSwap(prev, next) {
			return next
		}
	}
}
