package harness

import "testing"

// TestFlagValue: the restore seeds the log store the members will serve on,
// read from their extra arguments in either spelling, the last one winning
// as in flag parsing; none means coordd's default.
func TestFlagValue(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--snapshot-threshold", "32"}, ""},
		{[]string{"--raft-log-store", "bolt"}, "bolt"},
		{[]string{"--raft-log-store=wal"}, "wal"},
		{[]string{"--raft-log-store", "bolt", "--trailing-logs", "4", "--raft-log-store=wal"}, "wal"},
		{[]string{"--raft-log-store"}, ""},
		{[]string{"--raft-log-store-x=1"}, ""},
	} {
		if got := flagValue(c.args, "--raft-log-store"); got != c.want {
			t.Errorf("flagValue(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
