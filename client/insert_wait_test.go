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
	other := &coordpb.StreamingNode{Id: 6, Address: "127.0.0.1:7202", State: "UP", Epoch: 3, LastHeartbeatMsAgo: 100, NodeTtlMs: 10000}
	silent := &coordpb.StreamingNode{Id: 6, Address: "127.0.0.1:7202", State: "UP", Epoch: 3, LastHeartbeatMsAgo: 12000, NodeTtlMs: 10000}
	draining := &coordpb.StreamingNode{Id: 6, Address: "127.0.0.1:7202", State: "DRAINING", Epoch: 3, LastHeartbeatMsAgo: 100, NodeTtlMs: 10000}
	both := []*coordpb.StreamingNode{up, other}
	tests := []struct {
		name  string
		pc    *coordpb.PChannel
		n     *coordpb.StreamingNode
		nodes []*coordpb.StreamingNode
		err   error
		want  []string
		never []string
	}{
		{"unreachable owner", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, both, nil,
			[]string{"pchannel p_1 (ASSIGNED)", "streaming node 5 (127.0.0.1:7201, UP) has not heartbeated since 07:00:07.000",
				"moves the pchannel at about 07:00:17.000 (node TTL 10s; 1 other node(s) UP)"}, nil},
		{"owner refused", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, both, status.Error(codes.Unavailable, "connection refused"),
			[]string{"did not take the insert (connection refused)", "last heartbeat 07:00:07.000", "07:00:17.000"}, nil},
		// Review D3: a paused owner (the connection is accepted, nothing
		// answers) and no other node UP: DOWN is coming, a move is not.
		{"paused owner, no other node", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, []*coordpb.StreamingNode{up},
			status.Error(codes.DeadlineExceeded, "context deadline exceeded while waiting for connections to become ready"),
			[]string{"pchannel p_1 (ASSIGNED): its owner streaming node 5 (127.0.0.1:7201, UP) did not answer in time",
				"coordd marks it DOWN at about 07:00:17.000", "no other streaming node is UP, so the pchannel cannot move"}, []string{"moves the pchannel"}},
		{"paused owner, the other node silent too", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, []*coordpb.StreamingNode{up, silent}, nil,
			[]string{"no other streaming node is UP"}, []string{"moves the pchannel"}},
		{"paused owner, the other node judged silent", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up,
			[]*coordpb.StreamingNode{up, {Id: 6, State: "UP", Epoch: 3, LastHeartbeatMsAgo: 4000, NodeTtlMs: 10000, Silent: true}}, nil,
			[]string{"no other streaming node is UP"}, []string{"moves the pchannel"}},
		{"silent owner", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5},
			&coordpb.StreamingNode{Id: 5, Address: "127.0.0.1:7201", State: "UP", Epoch: 9, LastHeartbeatMsAgo: 3000, NodeTtlMs: 10000, Silent: true}, both, nil,
			[]string{"(127.0.0.1:7201, UP, SILENT: heartbeat late) has not heartbeated since 07:00:07.000"}, nil},
		{"paused owner, the other node draining", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, []*coordpb.StreamingNode{up, draining}, nil,
			[]string{"no other streaming node is UP"}, []string{"moves the pchannel"}},
		// Probe L19: the node answered (here: coordd's ID space is
		// exhausted), so it is live and nothing will move.
		{"owner answered", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, up, both,
			status.Error(codes.ResourceExhausted, "assign v: create segment: id space exhausted for segments"),
			[]string{"did not take the insert (assign v: create segment: id space exhausted for segments)", "it is live (last heartbeat 07:00:07.000)",
				"coordd does not move the pchannel"}, []string{"DOWN"}},
		{"not on the leader", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, &coordpb.StreamingNode{Id: 5, Address: "a:1", State: "UP", Epoch: 9, LastHeartbeatMsAgo: -1},
			[]*coordpb.StreamingNode{{Id: 5, Address: "a:1", State: "UP", Epoch: 9, LastHeartbeatMsAgo: -1}, {Id: 6, State: "UP", Epoch: 1, LastHeartbeatMsAgo: -1}}, nil,
			[]string{"coordd moves the pchannel once the node misses its heartbeat TTL"}, nil},
		{"not on the leader, alone", &coordpb.PChannel{Name: "p_1", State: "ASSIGNED", NodeId: 5}, &coordpb.StreamingNode{Id: 5, Address: "a:1", State: "UP", Epoch: 9, LastHeartbeatMsAgo: -1},
			[]*coordpb.StreamingNode{{Id: 5, Address: "a:1", State: "UP", Epoch: 9, LastHeartbeatMsAgo: -1}}, nil,
			[]string{"no other streaming node is UP to take the pchannel"}, []string{"moves the pchannel"}},
		{"in flight", &coordpb.PChannel{Name: "p_2", State: "ASSIGNING", NodeId: 6, Term: 4, LastAssignUnixMs: seen.UnixMilli(), LastError: "dial refused", FailedAttempts: 2, LastErrorUnixMs: seen.UnixMilli()},
			nil, both, nil, []string{"pchannel p_2 is ASSIGNING: being reassigned to streaming node 6 at term 4", "attempt 2 failed at 07:00:10.000: dial refused"}, nil},
		{"down owner, another node UP", &coordpb.PChannel{Name: "p_3", State: "ASSIGNED", NodeId: 7}, nil, both, nil,
			[]string{"pchannel p_3 is ASSIGNED to streaming node 7, whose session has ended (DOWN)", "coordd is moving it to one of the 2 UP node(s)"}, nil},
		// Review D3: "coordd is moving it to a live node" while none was UP.
		{"down owner, no node UP", &coordpb.PChannel{Name: "p_3", State: "ASSIGNED", NodeId: 7}, nil, nil, nil,
			[]string{"streaming node 7, whose session has ended (DOWN)", "no streaming node is UP, so coordd has nowhere to move it"}, []string{"moving", "moves"}},
		{"unavailable, no node UP", &coordpb.PChannel{Name: "p_5", State: "UNAVAILABLE", NodeId: 7}, nil, nil, nil,
			[]string{"pchannel p_5 is UNAVAILABLE (owner streaming node 7)", "no streaming node is UP"}, nil},
		{"no owner", nil, nil, both, nil, []string{"pchannel p_4 has no streaming node yet: coordd is placing it on one of the 2 UP node(s)"}, nil},
		{"no owner, no node UP", nil, nil, nil, nil, []string{"pchannel p_4 has no streaming node yet and no streaming node is UP"}, []string{"placing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pch := "p_4"
			if tt.pc != nil {
				pch = tt.pc.Name
			}
			got := explainWait(pch, tt.pc, tt.n, tt.nodes, tt.err, seen).Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Fatalf("%q lacks %q", got, w)
				}
			}
			for _, w := range tt.never {
				if strings.Contains(got, w) {
					t.Fatalf("%q says %q", got, w)
				}
			}
		})
	}
}
