package statuspage

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// Source is what the page reads: the member's own API handlers, called
// in-process with STALE consistency so the page answers on any member,
// leader or not, without a round trip to the leader.
type Source interface {
	Status(context.Context, *coordpb.StatusRequest) (*coordpb.StatusResponse, error)
	ListPChannels(context.Context, *coordpb.ListPChannelsRequest) (*coordpb.ListPChannelsResponse, error)
	ListNodes(context.Context, *coordpb.ListNodesRequest) (*coordpb.ListNodesResponse, error)
	ListBroadcasts(context.Context, *coordpb.ListBroadcastsRequest) (*coordpb.ListBroadcastsResponse, error)
	ListSegments(context.Context, *coordpb.ListSegmentsRequest) (*coordpb.ListSegmentsResponse, error)
	ListChannelCheckpoints(context.Context, *coordpb.ListChannelCheckpointsRequest) (*coordpb.ListChannelCheckpointsResponse, error)
}

// PeerStatus asks another member for its own status (its term, commit and
// applied index): only that member knows how far it has applied.
type PeerStatus func(ctx context.Context, httpAddr string) (*coordpb.StatusResponse, error)

// HTTPPeerStatus reads a member's GET /v1/cluster/status over HTTP with
// c; scheme is "http" or, on a secure cluster, "https" (c then presents
// the member's server certificate, which peers accept as a server).
func HTTPPeerStatus(c *http.Client, scheme string) PeerStatus {
	return func(ctx context.Context, httpAddr string) (*coordpb.StatusResponse, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+httpAddr+"/v1/cluster/status", nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
		}
		// The gateway writes snake_case names and 64-bit numbers unquoted,
		// which encoding/json reads into these fields directly.
		var st struct {
			NodeID       string `json:"node_id"`
			State        string `json:"state"`
			LeaderID     string `json:"leader_id"`
			Term         uint64 `json:"term"`
			CommitIndex  uint64 `json:"commit_index"`
			AppliedIndex uint64 `json:"applied_index"`
			LastLogIndex uint64 `json:"last_log_index"`
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return nil, fmt.Errorf("bad status body: %w", err)
		}
		return &coordpb.StatusResponse{NodeId: st.NodeID, State: st.State, LeaderId: st.LeaderID, Term: st.Term,
			CommitIndex: st.CommitIndex, AppliedIndex: st.AppliedIndex, LastLogIndex: st.LastLogIndex}, nil
	}
}

// PeerStorage asks another member which durable writes it keeps failing
// to make (a full disk), one sentence each; none when it writes fine.
type PeerStorage func(ctx context.Context, httpAddr string) ([]string, error)

// HTTPPeerStorage reads a member's GET /readyz (no credential needed) with
// c: a member whose storage fails answers 503 with the failing write as
// its status and a failing_since field.
func HTTPPeerStorage(c *http.Client, scheme string) PeerStorage {
	return func(ctx context.Context, httpAddr string) ([]string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+httpAddr+"/readyz", nil)
		if err != nil {
			return nil, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var r struct {
			Status       string `json:"status"`
			FailingSince string `json:"failing_since"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&r); err != nil {
			return nil, fmt.Errorf("bad /readyz body: %w", err)
		}
		if r.FailingSince == "" {
			return nil, nil
		}
		return []string{r.Status}, nil
	}
}

// view is everything the template shows.
type view struct {
	Self        string
	SelfState   string
	Leader      string
	Term        uint64
	Generated   string
	Refresh     int
	Members     []memberRow
	Nodes       []nodeGroup
	Unassigned  []pchannelRow
	CChannel    string
	Broadcasts  []broadcastRow
	VChannels   []vchannelRow
	SegStates   []string // column order of VChannels[i].Counts
	Errors      []string // sections that could not be read
	Storage     []string // durable writes this member keeps failing to make
	StateBytes  int64    // the state's estimated size (0: not known)
	StateBudget int64    // the memory guard's budget (0: off or not known)
	FailingBcst int
	Verdict     verdict
	Collections []collectionRow
	DownIdle    []uint64 // DOWN sessions that hold no pchannel (history)
	// LeaderPage is the leader's /ui when this member is not the leader
	// and knows where it is: heartbeat ages, and so silence, are known
	// only there (silence.go).
	LeaderPage string
	IsLeader   bool
	Scheme     string // how members' pages are reached (Handler.Scheme)
}

type memberRow struct {
	ID, Suffrage, RaftAddr, HTTPAddr, State string
	Leader                                  bool
	Term, Applied, Commit, Lag              uint64
	Err                                     string
	Storage                                 []string // durable writes it keeps failing to make (peers)
}

type nodeGroup struct {
	ID        uint64
	Address   string
	State     string
	Epoch     uint64
	Heartbeat string // "1.2s ago"; "" where the age is not known (a follower)
	PChannels []pchannelRow
	// The leader's heartbeat judgement (silence.go): zero on a follower.
	Silent                      bool
	AgeMs, SilentAfterMs, TTLMs int64
}

type pchannelRow struct {
	Name, State, Mode, LastError string
	Owner                        string // owner's state: UP, DRAINING, SILENT, DOWN ("" for none)
	Term                         int64
	Node                         uint64
	VChannels                    uint32
	Failed                       uint32
}

type broadcastRow struct {
	ID                 uint64
	Type, State, Error string
	Acked, VChannels   int
	Attempts           uint32
	Age                string
}

type vchannelRow struct {
	Name         string
	Counts       []int
	CheckpointTs uint64
	LagMs        int64
	HasCP        bool
	CheckpointAt string // the checkpoint's time tick as wall time (UTC)
}

// segmentStates is the order of the segment columns (data.proto).
var segmentStates = []string{"Growing", "Sealed", "Flushing", "Flushed", "Dropped", "Importing"}

// gather reads every section; a section that fails is reported on the page
// and the others still show.
func gather(ctx context.Context, h Handler) view {
	src, now := h.Source, h.Now()
	v := view{Generated: now.UTC().Format("2006-01-02 15:04:05 UTC"), SegStates: segmentStates}
	if h.Storage != nil {
		v.Storage = h.Storage()
	}
	if h.StateSize != nil {
		v.StateBytes, v.StateBudget = h.StateSize()
	}
	fail := func(what string, err error) { v.Errors = append(v.Errors, fmt.Sprintf("%s: %v", what, err)) }
	st, err := src.Status(ctx, &coordpb.StatusRequest{})
	if err != nil {
		fail("status", err)
	} else {
		v.Self, v.SelfState, v.Leader, v.Term = st.NodeId, st.State, st.LeaderId, st.Term
		v.Members = members(ctx, st, h.Peer, h.PeerStorage)
	}
	stale := coordpb.ReadConsistency_STALE
	pcs, err := src.ListPChannels(ctx, &coordpb.ListPChannelsRequest{Consistency: stale})
	if err != nil {
		fail("pchannels", err)
		pcs = &coordpb.ListPChannelsResponse{}
	}
	nodes, err := src.ListNodes(ctx, &coordpb.ListNodesRequest{Consistency: stale, IncludeDown: true})
	if err != nil {
		fail("streaming nodes", err)
		nodes = &coordpb.ListNodesResponse{}
	}
	v.CChannel = pcs.Cchannel
	v.Nodes, v.Unassigned = channelMap(pcs.Pchannels, nodes.Nodes)
	live := v.Nodes[:0:0]
	for _, g := range v.Nodes {
		if g.State == "DOWN" && len(g.PChannels) == 0 {
			v.DownIdle = append(v.DownIdle, g.ID)
			continue
		}
		live = append(live, g)
	}
	v.Nodes = live
	bs, err := src.ListBroadcasts(ctx, &coordpb.ListBroadcastsRequest{Consistency: stale, PendingOnly: true, Limit: 100})
	if err != nil {
		fail("broadcasts", err)
	} else {
		for _, b := range bs.Broadcasts {
			row := broadcastRow{ID: b.BroadcastId, Type: b.MessageType, State: b.State, Error: b.LastError,
				Acked: len(b.Acked), VChannels: len(b.Vchannels), Attempts: b.CallbackAttempts,
				Age: now.Sub(time.UnixMilli(b.CreatedUnixMs)).Truncate(time.Second).String()}
			if row.Error != "" {
				v.FailingBcst++
			}
			v.Broadcasts = append(v.Broadcasts, row)
		}
	}
	segs, err := src.ListSegments(ctx, &coordpb.ListSegmentsRequest{Consistency: stale, Limit: 10000})
	if err != nil {
		fail("segments", err)
		segs = &coordpb.ListSegmentsResponse{}
	}
	cps, err := src.ListChannelCheckpoints(ctx, &coordpb.ListChannelCheckpointsRequest{Consistency: stale})
	if err != nil {
		fail("checkpoints", err)
		cps = &coordpb.ListChannelCheckpointsResponse{}
	}
	v.VChannels = vchannels(segs.Segments, cps.Checkpoints)
	v.Collections = collections(segs.Segments)
	v.IsLeader, v.LeaderPage = leaderPage(&v, h.scheme())
	v.Verdict = judge(&v)
	return v
}

// members asks every member for its own indexes, in parallel; lag is how
// far a member's applied index trails the leader's commit index (or, with
// no leader reachable, the highest commit index seen).
func members(ctx context.Context, st *coordpb.StatusResponse, peer PeerStatus, storage PeerStorage) []memberRow {
	rows := make([]memberRow, len(st.Members))
	var wg sync.WaitGroup
	for i, m := range st.Members {
		rows[i] = memberRow{ID: m.Id, Suffrage: m.Suffrage, RaftAddr: m.RaftAddr, HTTPAddr: m.HttpAddr, Leader: m.Leader}
		if m.Id == st.NodeId {
			rows[i].State, rows[i].Term, rows[i].Applied, rows[i].Commit = st.State, st.Term, st.AppliedIndex, st.CommitIndex
			continue
		}
		if m.HttpAddr == "" {
			rows[i].Err = "no HTTP address registered"
			continue
		}
		wg.Add(1)
		go func(r *memberRow) {
			defer wg.Done()
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			ps, err := peer(pctx, r.HTTPAddr)
			if err != nil {
				r.Err = err.Error()
				return
			}
			r.State, r.Term, r.Applied, r.Commit = ps.State, ps.Term, ps.AppliedIndex, ps.CommitIndex
			if storage != nil {
				// Best effort: the member answered its status, so an error
				// here says nothing about its storage.
				r.Storage, _ = storage(pctx, r.HTTPAddr)
			}
		}(&rows[i])
	}
	wg.Wait()
	var ref uint64
	for _, r := range rows {
		if r.Leader && r.Err == "" {
			ref = r.Commit
		}
	}
	if ref == 0 {
		for _, r := range rows {
			ref = max(ref, r.Commit)
		}
	}
	for i := range rows {
		if rows[i].Err == "" && ref > rows[i].Applied {
			rows[i].Lag = ref - rows[i].Applied
		}
	}
	return rows
}

// channelMap groups PChannels under their streaming node; PChannels on no
// live node are listed apart.
func channelMap(pcs []*coordpb.PChannel, nodes []*coordpb.StreamingNode) ([]nodeGroup, []pchannelRow) {
	byID := map[uint64]int{}
	groups := make([]nodeGroup, 0, len(nodes))
	for _, n := range nodes {
		g := nodeGroup{ID: n.Id, Address: n.Address, State: n.State, Epoch: n.Epoch, AgeMs: n.LastHeartbeatMsAgo,
			Silent: n.Silent, SilentAfterMs: n.SilentAfterMs, TTLMs: n.NodeTtlMs}
		if n.LastHeartbeatMsAgo >= 0 {
			g.Heartbeat = humanMs(n.LastHeartbeatMsAgo) + " ago"
		}
		byID[n.Id] = len(groups)
		groups = append(groups, g)
	}
	var unassigned []pchannelRow
	for _, p := range pcs {
		row := pchannelRow{Name: p.Name, State: p.State, Mode: p.AccessMode, LastError: p.LastError,
			Term: p.Term, Node: p.NodeId, VChannels: p.VchannelCount, Failed: p.FailedAttempts}
		if i, ok := byID[p.NodeId]; ok && p.NodeId != 0 {
			row.Owner = groups[i].ownerState()
			groups[i].PChannels = append(groups[i].PChannels, row)
		} else {
			unassigned = append(unassigned, row)
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].ID < groups[j].ID })
	for _, g := range groups {
		sort.Slice(g.PChannels, func(i, j int) bool { return g.PChannels[i].Name < g.PChannels[j].Name })
	}
	sort.Slice(unassigned, func(i, j int) bool { return unassigned[i].Name < unassigned[j].Name })
	return groups, unassigned
}

// vchannels counts segments by state per VChannel and joins each VChannel's
// checkpoint (its lag is how long ago the checkpoint's time tick was).
func vchannels(segs []*coordpb.SegmentInfo, cps []*coordpb.ChannelCheckpoint) []vchannelRow {
	idx := map[string]int{}
	var rows []vchannelRow
	row := func(name string) *vchannelRow {
		i, ok := idx[name]
		if !ok {
			i = len(rows)
			idx[name] = i
			rows = append(rows, vchannelRow{Name: name, Counts: make([]int, len(segmentStates))})
		}
		return &rows[i]
	}
	for _, cp := range cps {
		if cp.Dropped {
			continue
		}
		r := row(cp.Vchannel)
		r.HasCP, r.LagMs = true, cp.LagMs
		if cp.Position != nil {
			r.CheckpointTs = cp.Position.Timestamp
			r.CheckpointAt = hybridTime(cp.Position.Timestamp)
		}
	}
	for _, s := range segs {
		r := row(s.Vchannel)
		for i, name := range segmentStates {
			if s.State == name {
				r.Counts[i]++
			}
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows
}
