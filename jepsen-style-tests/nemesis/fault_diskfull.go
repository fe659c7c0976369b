package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DiskFull fills one member's file system to the last byte (the members
// run on file systems of their own, harness.Config.DiskPerMember), moves
// leadership so that every member stores a new term, holds, then frees the
// space. The member must not crash (no-crashes sees a panic or an exit):
// it stops taking part, says "disk full" on /readyz, and serves again by
// itself once the space is back (docs/operations.md#full-disk). raft-wal
// cannot create its next segment file on a full disk and does not retry
// it (a limit of raft-wal, documented there): a member that needed one is
// restarted after the space is freed, which is the documented repair, and
// the window says so. One that neither recovers nor comes back after a
// restart is a violation. Not in AllKinds (members need their own disks);
// the matrices name it.
const DiskFull Kind = "disk-full"

// DiskFiller is a Cluster whose members can have their disks filled
// (harness.Cluster implements it).
type DiskFiller interface {
	HasDisks() bool
	FillDisk(i int) (string, error)
	FreeDisk(i int) error
}

// How long a member whose disk was freed gets to serve again by itself.
const diskFullRecovery = 20 * time.Second

func init() { faults[DiskFull] = diskFull{} }

type diskFull struct{}

func (diskFull) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	df, ok := n.c.(DiskFiller)
	if !ok {
		return errors.New("the cluster cannot fill disks")
	}
	w.Start = n.c.Now()
	if !df.HasDisks() {
		w.Detail = "skipped: the members have no file systems of their own (mounting a tmpfs was refused)"
		return nil
	}
	victims := n.victims(ctx, s)
	if len(victims) == 0 {
		return errors.New("no victim")
	}
	v := victims[0]
	w.Targets = n.c.ID(v)
	detail, err := df.FillDisk(v)
	w.Detail = detail
	if err != nil {
		_ = df.FreeDisk(v)
		return err
	}
	// A new term: every member stores it, the full one included.
	terr := n.transferTo(ctx, "")
	w.Detail += fmt.Sprintf("; transfer: %s", errOK(terr))
	sleep(ctx, max(hold, 2*time.Second))
	if err := df.FreeDisk(v); err != nil {
		return fmt.Errorf("free %s's disk: %w", n.c.ID(v), err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diskFullRecovery)
	err = n.c.WaitReady(rctx, v, diskFullRecovery)
	cancel()
	if err == nil {
		w.Detail += "; freed, serving again by itself"
		return nil
	}
	// Most likely raft-wal's next segment was never created: restart.
	w.Detail += fmt.Sprintf("; freed, not ready within %v (%v): restarted", diskFullRecovery, err)
	if err := n.c.Kill(v); err != nil {
		return err
	}
	if err := n.c.Start(v); err != nil {
		return err
	}
	if err := n.c.WaitReady(context.WithoutCancel(ctx), v, 30*time.Second); err != nil {
		n.violation("%s neither served again after its disk was freed nor after a restart: %v", n.c.ID(v), err)
		return nil
	}
	w.Detail += ", serving"
	return nil
}
