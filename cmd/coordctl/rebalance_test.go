package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

func TestPrintRebalance(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		resp *coordpb.RebalanceResponse
		want []string
	}{
		{"moves", &coordpb.RebalanceResponse{RoundDone: true, Moves: []*coordpb.PChannelMove{{Pchannel: "p_1", FromNodeId: 1, ToNodeId: 2, Term: 5}, {Pchannel: "p_2", ToNodeId: 2, Term: 3}}},
			[]string{"Moved 2 pchannel(s):", "PCHANNEL", "p_1", "p_2"}},
		{"balanced", &coordpb.RebalanceResponse{RoundDone: true, Reason: "placement is balanced"}, []string{"Nothing moved: placement is balanced."}},
		{"blocked", &coordpb.RebalanceResponse{RoundDone: true, Reason: "blocked by --min-rebalance-interval", NextMoveUnixMs: now.Add(3 * time.Minute).UnixMilli()},
			[]string{"Nothing moved: blocked by --min-rebalance-interval.", "Next move possible at " + now.Add(3*time.Minute).Local().Format("15:04:05") + " (in 3m0s)."}},
		{"not done", &coordpb.RebalanceResponse{Reason: "the round did not finish"}, []string{"Rebalance requested: the round did not finish."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := printRebalance(&b, tt.resp, now); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(b.String(), w) {
					t.Fatalf("output lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
