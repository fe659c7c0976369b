package nemesis

import "testing"

// TestLineWithFindsARefusalBeforeALaterLogLine: the refusal is what main
// prints last, but a transport goroutine can log after it; the check reads
// every line (storage-3-snap-r02 seed 915195605 failed on the last line
// alone).
func TestLineWithFindsARefusalBeforeALaterLogLine(t *testing.T) {
	out := "2026-12-02T13:07:13.300Z [INFO]  coordd: starting\n" +
		"coordd: member n1 (127.0.0.1:7101) already belongs to cluster 0607, which this data dir did not found\n" +
		"2026-12-02T13:07:13.360Z [ERROR] coordd.handshake: refused a raft connection: reason=\"member n1 has not bootstrapped or joined a cluster yet\"\n"
	for _, tc := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"already belongs to cluster", "is already in the cluster"}, true},
		{[]string{"is already in the cluster"}, false},
		{nil, false},
	} {
		line, ok := lineWith(out, tc.want...)
		if ok != tc.ok {
			t.Fatalf("lineWith(%q) = %q, %v; want found=%v", tc.want, line, ok, tc.ok)
		}
		if ok && line != "coordd: member n1 (127.0.0.1:7101) already belongs to cluster 0607, which this data dir did not found" {
			t.Fatalf("lineWith returned %q", line)
		}
	}
	if got := lastLine(out); got == "" || got[len(got)-1] != '"' {
		t.Fatalf("lastLine = %q", got)
	}
}
