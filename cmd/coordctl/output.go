package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/coordd/coordd/api/coordpb"
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
	File           string `json:"file"`
	Bytes          int64  `json:"bytes"`
	LeaderID       string `json:"leader_id"`
	LeaderGRPCAddr string `json:"leader_grpc_addr"`
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
