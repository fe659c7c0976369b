package harness

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"time"
)

// A cluster that starts from a preloaded state (Config.Restore) is built
// the way docs/operations.md#backup-and-restore says: `coordd restore`
// seeds the first member's empty data dir from the backup, that member
// starts and elects itself, and every other member joins it with an empty
// data dir and --join, one at a time, receiving the state as a snapshot
// install. Later restarts of any member keep those command lines (--peers
// for the first, --join for the others), as an operator's would.

// startRestored restores Config.Restore into member 0, starts it, and lets
// the others join it one by one, each ready before the next starts.
func (c *Cluster) startRestored(ctx context.Context) error {
	m := c.members[0]
	args := []string{"restore", "--snapshot", c.cfg.Restore, "--data-dir", m.DataDir, "--id", m.ID,
		"--raft-addr", m.RaftAddr, "--id-floor", strconv.FormatUint(c.cfg.RestoreIDFloor, 10)}
	if store := flagValue(c.cfg.ExtraArgs, "--raft-log-store"); store != "" {
		args = append(args, "--raft-log-store", store) // the store the member will serve on
	}
	t0 := time.Now()
	if out, err := exec.CommandContext(ctx, c.bin.Coordd, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("harness: coordd restore into %s: %w: %s", m.ID, err, out)
	}
	c.Logf("restored %s into %s in %.1f s", c.cfg.Restore, m.ID, time.Since(t0).Seconds())
	t0 = time.Now()
	if err := c.Start(0); err != nil {
		return err
	}
	if err := c.WaitReady(ctx, 0, c.cfg.readyTimeout()); err != nil {
		return err
	}
	c.Logf("%s serving the restored state after %.1f s", m.ID, time.Since(t0).Seconds())
	for i := 1; i < len(c.members); i++ {
		t0 := time.Now()
		if err := c.StartJoining(i); err != nil {
			return err
		}
		if err := c.WaitReady(ctx, i, c.cfg.readyTimeout()); err != nil {
			return err
		}
		c.Logf("%s joined and caught up by snapshot install in %.1f s", c.members[i].ID, time.Since(t0).Seconds())
	}
	return nil
}

// flagValue is the value of the last "--name value" or "--name=value" in
// args, or "".
func flagValue(args []string, name string) string {
	v := ""
	for i, a := range args {
		switch {
		case a == name && i+1 < len(args):
			v = args[i+1]
		case len(a) > len(name) && a[:len(name)+1] == name+"=":
			v = a[len(name)+1:]
		}
	}
	return v
}
