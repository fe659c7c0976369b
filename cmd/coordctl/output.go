package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/client"
)

// JSON shapes of -o json. Numbers are JSON numbers (protojson would quote
// uint64) and names are snake_case.

type memberJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raft_addr"`
	GRPCAddr string `json:"grpc_addr"`
	HTTPAddr string `json:"http_addr"`
	Suffrage string `json:"suffrage"`
	Leader   bool   `json:"leader"`
}

type membersJSON struct {
	Members []memberJSON `json:"members"`
}

type statusJSON struct {
	NodeID            string       `json:"node_id"`
	State             string       `json:"state"`
	LeaderID          string       `json:"leader_id"`
	LeaderGRPCAddr    string       `json:"leader_grpc_addr"`
	Term              uint64       `json:"term"`
	CommitIndex       uint64       `json:"commit_index"`
	AppliedIndex      uint64       `json:"applied_index"`
	LastLogIndex      uint64       `json:"last_log_index"`
	LastSnapshotIndex uint64       `json:"last_snapshot_index"`
	EstablishedTerm   uint64       `json:"established_term"`
	Members           []memberJSON `json:"members"`
}

type transferJSON struct {
	LeaderID string `json:"leader_id"`
	Term     uint64 `json:"term"`
}

type allocJSON struct {
	First  uint64   `json:"first"`
	Count  uint32   `json:"count"`
	Values []uint64 `json:"values"`
}

type snapshotJSON struct {
	File           string  `json:"file"`
	Bytes          int64   `json:"bytes"`
	StateBytes     uint64  `json:"state_bytes"`
	LeaderID       string  `json:"leader_id"`
	LeaderGRPCAddr string  `json:"leader_grpc_addr"`
	ClusterID      string  `json:"cluster_id"`
	Index          uint64  `json:"index"`
	Term           uint64  `json:"term"`
	SHA256         string  `json:"sha256"`
	Seconds        float64 `json:"seconds"`
}

type inspectJSON struct {
	File          string         `json:"file"`
	FormatVersion int            `json:"format_version"`
	ClusterID     string         `json:"cluster_id"`
	LeaderID      string         `json:"leader_id"`
	Index         uint64         `json:"index"`
	Term          uint64         `json:"term"`
	Created       string         `json:"created"`
	StateBytes    uint64         `json:"state_bytes"`
	SHA256        string         `json:"sha256"`
	Checksum      string         `json:"checksum"`
	Tables        []backup.Table `json:"tables"`
}

type versionJSON struct {
	Global uint64 `json:"global"`
	Local  uint64 `json:"local"`
}

type pchannelJSON struct {
	Name        string `json:"name"`
	Term        int64  `json:"term"`
	State       string `json:"state"`
	NodeID      uint64 `json:"node_id"`
	NodeAddress string `json:"node_address"`
	// OwnerState is the owner's session state: UP, DRAINING, SILENT (its
	// heartbeat late; only the leader knows) or DOWN; "" with no owner.
	OwnerState             string `json:"owner_state"`
	AccessMode             string `json:"access_mode"`
	AvailableInReplication bool   `json:"available_in_replication"`
	VChannelCount          uint32 `json:"vchannel_count"`
	LastAssignUnixMs       int64  `json:"last_assign_unix_ms"`
	LastError              string `json:"last_error"`
	FailedAttempts         uint32 `json:"failed_attempts"`
}

type pchannelsJSON struct {
	PChannels []pchannelJSON `json:"pchannels"`
	CChannel  string         `json:"cchannel"`
	Version   versionJSON    `json:"version"`
}

type addedJSON struct {
	Added    uint32 `json:"added"`
	Existing uint32 `json:"existing"`
}

type streamingNodeJSON struct {
	ID                 uint64   `json:"id"`
	Address            string   `json:"address"`
	ResourceGroup      string   `json:"resource_group"`
	State              string   `json:"state"`
	Epoch              uint64   `json:"epoch"`
	PChannels          []string `json:"pchannels"`
	LastHeartbeatMsAgo int64    `json:"last_heartbeat_ms_ago"`
	Reason             string   `json:"reason"`
	// BoundNode: the node identity of the credential that registered the
	// session (docs/security.md#per-node-identity), 0 without one.
	BoundNode uint64 `json:"bound_node,omitempty"`
}

type nodesJSON struct {
	Nodes []streamingNodeJSON `json:"nodes"`
}

type drainJSON struct {
	Node streamingNodeJSON `json:"node"`
}

type vchannelsJSON struct {
	VChannels []string `json:"vchannels"`
}

type collectionJSON struct {
	CollectionID int64    `json:"collection_id"`
	VChannels    []string `json:"vchannels"`
}

type collectionsJSON struct {
	Collections []collectionJSON `json:"collections"`
}

type droppedJSON struct {
	CollectionID int64 `json:"collection_id"`
	Dropped      bool  `json:"dropped"`
}

// assignmentJSON is one line of 'assignment watch -o json'.
type assignmentJSON struct {
	Version  versionJSON          `json:"version"`
	CChannel string               `json:"cchannel"`
	Nodes    int                  `json:"nodes"`
	Assigned []nodeAssignmentJSON `json:"assigned"`
}

type nodeAssignmentJSON struct {
	NodeID   uint64 `json:"node_id"`
	State    string `json:"state"`
	Channels int    `json:"channels"`
}

type replicateClusterJSON struct {
	ClusterID string   `json:"cluster_id"`
	PChannels []string `json:"pchannels"`
}

type replicateEdgeJSON struct {
	SourceClusterID string `json:"source_cluster_id"`
	TargetClusterID string `json:"target_cluster_id"`
}

type replicateConfigJSON struct {
	Clusters []replicateClusterJSON `json:"clusters"`
	Topology []replicateEdgeJSON    `json:"topology"`
}

type replicateGetJSON struct {
	ClusterID string               `json:"cluster_id"`
	Role      string               `json:"role"`
	Config    *replicateConfigJSON `json:"config"`
}

type replicateSetJSON struct {
	Updated bool                 `json:"updated"`
	Config  *replicateConfigJSON `json:"config"`
}

func toVersionJSON(v *coordpb.Version) versionJSON {
	return versionJSON{Global: v.GetGlobal(), Local: v.GetLocal()}
}

func toNodesJSON(nodes []*coordpb.StreamingNode) any {
	out := nodesJSON{Nodes: []streamingNodeJSON{}}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, toNodeJSON(n))
	}
	return out
}

func toNodeJSON(n *coordpb.StreamingNode) streamingNodeJSON {
	return streamingNodeJSON{
		ID: n.GetId(), Address: n.GetAddress(), ResourceGroup: n.GetResourceGroup(), State: n.GetState(),
		Epoch: n.GetEpoch(), PChannels: append([]string{}, n.GetPchannels()...),
		LastHeartbeatMsAgo: n.GetLastHeartbeatMsAgo(), Reason: n.GetReason(), BoundNode: n.GetBoundNode(),
	}
}

// toReplicateJSON is nil for a nil configuration.
func toReplicateJSON(c *coordpb.ReplicateConfiguration) *replicateConfigJSON {
	if c == nil {
		return nil
	}
	out := &replicateConfigJSON{Clusters: []replicateClusterJSON{}, Topology: []replicateEdgeJSON{}}
	for _, cl := range c.GetClusters() {
		out.Clusters = append(out.Clusters, replicateClusterJSON{ClusterID: cl.GetClusterId(), PChannels: append([]string{}, cl.GetPchannels()...)})
	}
	for _, e := range c.GetTopology() {
		out.Topology = append(out.Topology, replicateEdgeJSON{SourceClusterID: e.GetSourceClusterId(), TargetClusterID: e.GetTargetClusterId()})
	}
	return out
}

func toMembersJSON(ms []*coordpb.Member) []memberJSON {
	out := make([]memberJSON, 0, len(ms))
	for _, m := range ms {
		out = append(out, memberJSON{
			ID: m.GetId(), RaftAddr: m.GetRaftAddr(), GRPCAddr: m.GetGrpcAddr(),
			HTTPAddr: m.GetHttpAddr(), Suffrage: m.GetSuffrage(), Leader: m.GetLeader(),
		})
	}
	return out
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

func writeMembersTable(w io.Writer, ms []*coordpb.Member) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tSUFFRAGE\tLEADER\tRAFT ADDR\tGRPC ADDR\tHTTP ADDR")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.GetId(), dash(m.GetSuffrage()),
			strconv.FormatBool(m.GetLeader()), dash(m.GetRaftAddr()), dash(m.GetGrpcAddr()), dash(m.GetHttpAddr()))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// show writes a command's answer, the one way every command does: v as
// indented JSON under -o json, otherwise what text writes to the output
// (a table or a sentence).
func (e *env) show(v any, text func(w io.Writer) error) error {
	if e.json {
		return writeJSON(e.out, v)
	}
	return text(e.out)
}

// fetched is the run of a command that asks for one answer and shows it
// (see env.show): the answer of fetch, as toJSON's value under -o json,
// otherwise as text writes it.
func fetched[T any](fetch func(context.Context, *client.Client) (T, error), toJSON func(T) any, text func(io.Writer, T) error) func(context.Context, *env) error {
	return func(ctx context.Context, e *env) error {
		v, err := fetch(ctx, e.c)
		if err != nil {
			return err
		}
		return e.show(toJSON(v), func(w io.Writer) error { return text(w, v) })
	}
}

// sentence is the text of an answer that is one formatted line.
func sentence(format string, args ...any) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format, args...)
		return err
	}
}
