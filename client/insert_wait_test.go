package client

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// Every wait of an insert explains itself: the PChannel, its owner, and
// when coordd acts.
func TestExplainWait(t *testing.T) {
	seen := time.Date(2026, 12, 2, 7, 0, 10, 0, time.Local)
	up := &coordpb.StreamingNode{Id: 5, Address: "127.0.0.1:7201", State: "UP", Epoch: 9, LastHeartbeatMsAgo: 3000, NodeTtlMs: 10000}
	tests := []struct {
		name string
		pc   *coordpb.PChannel
		n    *coordpb.StreamingNode
		err  error
		want []string
	}{
		{"unreachable owner", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, nil,
			[]string{"pchannel p_1", "streaming node 5 (127.0.0.1:7201) has not heartbeated since 07:00:07.000", "moves the pchannel at about 07:00:17.000 (node TTL 10s)"}},
		{"owner refused", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, status.Error(codes.Unavailable, "connection refused"),
			[]string{"did not take the insert (connection refused)", "last heartbeat 07:00:07.000", "07:00:17.000"}},
		// Probe L19: the node answered (here: coordd's ID space is
		// exhausted), so it is live and nothing will move.
		{"owner answered", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up,
			status.Error(codes.ResourceExhausted, "assign v: create segment: id space exhausted for segments"),
			[]string{"did not take the insert (assign v: create segment: id space exhausted for segments)", "it is live (last heartbeat 07:00:07.000)",
				"coordd does not move the pchannel"}},
		{"not on the leader", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, &coordpb.StreamingNode{Id: 5, Address: "a:1", Epoch: 9, LastHeartbeatMsAgo: -1}, nil,
			[]string{"once the node misses its heartbeat TTL"}},
		{"in flight", &coordpb.PChannel{Name: "p_2", State: "ASSIGNING", NodeId: 6, Term: 4, LastAssignUnixMs: seen.UnixMilli(), LastError: "dial refused", FailedAttempts: 2, LastErrorUnixMs: seen.UnixMilli()},
			nil, nil, []string{"pchannel p_2 is being reassigned to streaming node 6 at term 4", "attempt 2 failed at 07:00:10.000: dial refused"}},
		{"down owner", &coordpb.PChannel{Name: "p_3", State: "ASSIGNED", NodeId: 7}, nil, nil, []string{"streaming node 7, which is not live (DOWN)"}},
		{"no owner", nil, nil, nil, []string{"pchannel p_4 has no streaming node yet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pch := "p_4"
			if tt.pc != nil {
				pch = tt.pc.Name
			}
			got := explainWait(pch, tt.pc, tt.n, tt.err, seen).Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Fatalf("%q lacks %q", got, w)
				}
			}
			if tt.name == "owner answered" && strings.Contains(got, "DOWN") {
				t.Fatalf("%q predicts a move of a live node's pchannel", got)
			}
		})
	}
}
