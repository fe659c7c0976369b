package scenario

import (
	"testing"
	"time"
)

func TestOwnerBound(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{ChannelArgs, 2*time.Second + time.Second + 2*time.Second},
		{FlushArgs, 5 * time.Second},
		{nil, 10*time.Second + time.Minute + 2*time.Second}, // coordd's defaults
		{[]string{"--pchannels", "4", "--node-ttl", "3s"}, 3*time.Second + time.Minute + 2*time.Second},
	} {
		if got := OwnerBound(tc.args); got != tc.want {
			t.Errorf("OwnerBound(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
