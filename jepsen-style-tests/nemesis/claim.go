package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/vocab"
)

// The claim writer holds the proxy credential, which every proxy has and
// which may write to a streaming node's port, and tries to put records
// under the keys of broadcasts coordd is about to make (issue 34, probe
// D11): it reads the newest broadcast IDs (ListBroadcasts), guesses the
// next few (IDs come from one counter, so the next broadcast takes one of
// them unless the ID allocator reserves a window first), and writes to a
// VChannel recent broadcasts target, on its owner's port, with the
// guessed ID as
//
//   - claim-append: an Append's broadcast_id, without coord_term (the node
//     must refuse it: InvalidArgument);
//   - claim-coord: the same with the coordinator's current raft term, as
//     if it were coordd's broadcaster (refused: PermissionDenied, only
//     coordd's server identity sends coordinator appends);
//   - claim-batch: an AppendBatch item, coordd's batched call (refused
//     likewise);
//   - claim-insert: an Insert's dedup_id (one row): a write a proxy may
//     make, accepted when the VChannel belongs to a collection, and
//     harmless because DML messages dedup in a key space of their own
//     (docs/security.md#broadcast-records).
//
// Every claim is a history op f = HostilePrefix+kind whose input is a
// ClaimIn. hostile-refused requires the three append kinds refused and
// leaves claim-insert to broadcast-at-most-once (workload/broadcast_dups.go),
// which requires coordd's own message under every broadcast ID in every
// target and no record with a claim's payload under any broadcast ID.
const (
	ClaimAppend = "claim-append"
	ClaimCoord  = "claim-coord"
	ClaimBatch  = "claim-batch"
	ClaimInsert = "claim-insert"
	// ClaimPayloadPrefix starts every claimed Append's payload.
	ClaimPayloadPrefix = "hostile-claim-"
	// claimPKBase is far above any ID the allocator hands out in a run,
	// so a claimed insert's row never meets a workload's primary key.
	claimPKBase = int64(1) << 50
	// claimAhead: a claim names one of the next claimAhead IDs.
	claimAhead = 4
)

// ClaimKinds are the claim writer's kinds; ClaimHarmlessKinds those a
// node may accept (judged by their effect, not by being accepted).
var (
	ClaimKinds         = []string{ClaimAppend, ClaimCoord, ClaimBatch, ClaimInsert}
	ClaimHarmlessKinds = []string{ClaimInsert}
)

// ClaimIn is a claim's input in the history.
type ClaimIn struct {
	Cred    string `json:"cred"`
	Target  string `json:"target"`
	Node    uint64 `json:"node"`
	Term    int64  `json:"term"`
	ID      uint64 `json:"broadcast_id"`
	Payload string `json:"payload,omitempty"` // appends: the forged payload
}

// ClaimOut is an accepted claim's answer: where its record landed.
type ClaimOut struct {
	Term      int64  `json:"term"`
	Offset    uint64 `json:"offset"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// runClaims claims broadcast IDs with cred every 100-300 ms until ctx
// ends; the decisions (kind, target, ID offset) come from the seed.
func runClaims(ctx context.Context, cfg HostileConfig, cred HostileCred) {
	c, err := client.New(ctx, cred.Config(client.Config{Endpoints: cfg.Endpoints, RequestTimeout: hostileCallLimit,
		AttemptTimeout: time.Second, DialTimeout: 500 * time.Millisecond}))
	if err != nil {
		return
	}
	defer c.Close()
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x636c61696d))
	seq := int64(0)
	for sleep(ctx, time.Duration(100+rng.IntN(200))*time.Millisecond) {
		kind := ClaimKinds[rng.IntN(len(ClaimKinds))]
		st, err := readClaimState(ctx, c)
		if err != nil || len(st.targets) == 0 {
			continue // no broadcast yet, or a fault: nothing to claim from
		}
		vch := st.targets[rng.IntN(len(st.targets))]
		pc := st.pchannels[vocab.PChannelOf(vch)]
		if pc == nil || pc.State != "ASSIGNED" || st.nodes[pc.NodeId] == nil {
			continue
		}
		node := st.nodes[pc.NodeId]
		conn := conns[node.Address]
		if conn == nil {
			if conn, err = cred.DialNode(node.Address); err != nil {
				continue
			}
			conns[node.Address] = conn
		}
		seq++
		in := ClaimIn{Cred: cred.Name, Target: vch, Node: node.Id, Term: pc.Term, ID: st.maxID + 1 + uint64(rng.IntN(claimAhead))}
		claimOnce(ctx, cfg, kind, coordpb.NewStreamingNodeServiceClient(conn), node, st.coordTerm, in, claimPKBase+seq)
	}
}

// claimOnce makes one claim and records it.
func claimOnce(ctx context.Context, cfg HostileConfig, kind string, sn coordpb.StreamingNodeServiceClient, node *coordpb.StreamingNode,
	coordTerm uint64, in ClaimIn, pk int64) {
	cctx, cancel := context.WithTimeout(ctx, hostileCallLimit)
	defer cancel()
	req := &coordpb.AppendRequest{Vchannel: in.Target, Term: in.Term, BroadcastId: in.ID, NodeId: node.Id, Epoch: node.Epoch}
	if kind != ClaimInsert {
		in.Payload = fmt.Sprintf("%s%d-%s", ClaimPayloadPrefix, in.ID, kind)
		req.Payload = []byte(in.Payload)
	}
	if kind == ClaimCoord || kind == ClaimBatch {
		req.CoordTerm = coordTerm
	}
	p := cfg.Recorder.Invoke(cfg.ClientID+2, HostilePrefix+kind, in)
	var resp *coordpb.AppendResponse
	var err error
	switch kind {
	case ClaimAppend, ClaimCoord:
		resp, err = sn.Append(cctx, req)
	case ClaimBatch:
		var br *coordpb.AppendBatchResponse
		if br, err = sn.AppendBatch(cctx, &coordpb.AppendBatchRequest{Items: []*coordpb.AppendRequest{req}}); err == nil {
			resp, err = batchItem(br)
		}
	case ClaimInsert:
		coll, _ := vocab.CollectionOfVChannel(in.Target) // 0 for the CChannel: refused as invalid
		var ir *coordpb.InsertResponse
		ir, err = sn.Insert(cctx, &coordpb.InsertRequest{Vchannel: in.Target, Term: in.Term, CollectionId: coll, Pks: []int64{pk},
			DedupId: in.ID, NodeId: node.Id, Epoch: node.Epoch})
		if err == nil {
			resp = &coordpb.AppendResponse{Id: ir.Id, Duplicate: ir.Duplicate}
		}
	}
	if err != nil {
		complete(p, err)
		return
	}
	p.Ok(ClaimOut{Term: resp.GetId().GetTerm(), Offset: resp.GetId().GetOffset(), Duplicate: resp.Duplicate})
}

// batchItem is the one item's answer of an AppendBatch as an Append's.
func batchItem(br *coordpb.AppendBatchResponse) (*coordpb.AppendResponse, error) {
	if len(br.Results) != 1 {
		return nil, fmt.Errorf("AppendBatch answered %d results for 1 item", len(br.Results))
	}
	r := br.Results[0]
	if r.Code != 0 {
		return nil, statusOf(r.Code, r.Message)
	}
	return r.Response, nil
}

// claimState is what the claim writer reads before a claim.
type claimState struct {
	maxID     uint64
	targets   []string // VChannels (and the CChannel) of the newest broadcasts
	pchannels map[string]*coordpb.PChannel
	nodes     map[uint64]*coordpb.StreamingNode
	coordTerm uint64
}

func readClaimState(ctx context.Context, c *client.Client) (*claimState, error) {
	st := &claimState{pchannels: map[string]*coordpb.PChannel{}, nodes: map[uint64]*coordpb.StreamingNode{}}
	bs, err := c.ListBroadcasts(ctx, false, 16)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, b := range bs {
		st.maxID = max(st.maxID, b.BroadcastId)
		for _, v := range b.Vchannels {
			if !seen[v] {
				seen[v] = true
				st.targets = append(st.targets, v)
			}
		}
	}
	sort.Strings(st.targets) // the seed's choice must not depend on map order
	pcs, err := c.ListPChannels(ctx, coordpb.ReadConsistency_LINEARIZABLE)
	if err != nil {
		return nil, err
	}
	for _, pc := range pcs.Pchannels {
		st.pchannels[pc.Name] = pc
	}
	ns, err := c.ListNodes(ctx, coordpb.ReadConsistency_LINEARIZABLE, false)
	if err != nil {
		return nil, err
	}
	for _, n := range ns {
		st.nodes[n.Id] = n
	}
	s, err := c.Status(ctx)
	if err != nil {
		return nil, err
	}
	st.coordTerm = s.Term
	return st, nil
}

// statusOf is an AppendBatch item's refusal as the status error the same
// Append would have returned.
func statusOf(code uint32, msg string) error { return status.Error(codes.Code(code), msg) }

// claimCred is the credential the claim writer holds: the proxy's.
func claimCred(creds []HostileCred) (HostileCred, bool) {
	for _, c := range creds {
		if c.Name == "proxy" {
			return c, true
		}
	}
	return HostileCred{}, false
}
