package datapath

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// A heartbeat's declared interval is kept as a duration; a negative or
// absurd one is refused with a clear InvalidArgument-class error.
func TestHeartbeatIntervalIsValidated(t *testing.T) {
	for _, tc := range []struct {
		ms      int64
		want    time.Duration
		wantErr string
	}{
		{0, 0, ""},
		{1000, time.Second, ""},
		{3_600_000, time.Hour, ""},
		{-1, 0, "heartbeat_interval_ms is -1, want 0 (not said) to 3600000"},
		{3_600_001, 0, "heartbeat_interval_ms is 3600001"},
	} {
		h, err := NewHeartbeat(&coordpb.HeartbeatRequest{NodeId: 1, Epoch: 1, HeartbeatIntervalMs: tc.ms})
		if tc.wantErr != "" {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%d ms: error %v, want invalid containing %q", tc.ms, err, tc.wantErr)
			}
			continue
		}
		if err != nil || h.interval != tc.want {
			t.Errorf("%d ms: interval %v, error %v; want %v", tc.ms, h.interval, err, tc.want)
		}
	}
}
