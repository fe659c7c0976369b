package nemesis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Storage faults, applied to a stopped member's data dir by the cluster
// (see Cluster.Damage).
const (
	LoseRaftDB         = "lose-raft-db"         // raft.db deleted, the identity record kept
	WipeDataDir        = "wipe-data-dir"        // the whole data dir deleted
	TruncateRaftDB     = "truncate-raft-db"     // raft.db cut to half its size (at least 3 pages)
	FlipRaftDB         = "flip-raft-db"         // bytes flipped in every page after the two meta pages
	DropSnapshots      = "drop-snapshots"       // snapshots/ deleted
	GarbleSnapshotMeta = "garble-snapshot-meta" // every snapshot's meta.json replaced by garbage
	FlipSnapshots      = "flip-snapshots"       // one byte flipped in every snapshot's state.bin
	// HoleInLog deletes one raft.db log entry between the newest snapshot
	// and the end of the log: raft would read through the hole on start.
	// (Holes below the snapshot are what a snapshot install leaves, and
	// must be accepted.)
	HoleInLog = "hole-in-log"
)

// Storage faults of the raft-wal log store (wal/: segment files and
// wal-meta.db) and of the record of how far the log reached (log-reach).
const (
	EmptyWAL          = "empty-wal"           // every file under wal/ deleted, the directory kept
	ZeroWALTail       = "zero-wal-tail"       // zeros from the middle entry of the newest segment to its end
	CutWALSegment     = "cut-wal-segment"     // the newest segment truncated to half its size
	DropNewestSegment = "drop-newest-segment" // the newest segment file deleted
	LoseLogReach      = "lose-log-reach"      // log-reach deleted
)

// DamageKinds are the damages storage-damage draws from on a data dir
// whose log is in raft.db.
var DamageKinds = []string{TruncateRaftDB, FlipRaftDB, DropSnapshots, GarbleSnapshotMeta, FlipSnapshots, HoleInLog}

// WALDamageKinds are the damages storage-damage draws from on a raft-wal
// data dir (the default log store): its log's, and raft.db's and the
// snapshots' as on bolt.
var WALDamageKinds = []string{EmptyWAL, ZeroWALTail, CutWALSegment, DropNewestSegment, LoseLogReach,
	TruncateRaftDB, FlipRaftDB, DropSnapshots, FlipSnapshots}

// DamageResult is what Cluster.Damage did.
type DamageResult struct {
	Detail string
	// LosesStored says the damage took away log entries the member had
	// stored durably: by the index its log-reach record held before the
	// damage, against the end of the log and the newest snapshot read
	// from the files after it (or the record itself is gone). A member
	// must refuse such a data dir; serving it is a violation.
	LosesStored bool
}

// What a member says when it refuses a data dir (raftnode's errors).
const (
	refusedLost    = "has lost its raft state"
	refusedDamaged = "is damaged: "
	refusedForeign = "already belongs to cluster" // a wiped founder restarted with --peers
	refusedMember  = "is already in the cluster"  // a wiped replacement restarted with --join
)

// refusalWait bounds how long a refusing member may take to exit.
const refusalWait = 6 * time.Second

// diskLoss plays a member losing its disk and an operator replacing it:
//  1. the member is killed and its raft.db deleted (the identity record
//     survives): restarted as before, it must refuse to start;
//  2. its whole data dir is deleted: restarted as before (--peers), it must
//     refuse to bootstrap again beside its running peers;
//  3. it is replaced as docs/operations.md says: removed from the
//     configuration, then started with an empty data dir and --join.
//
// A member that starts serving in step 1 or 2 is a violation (Violations):
// it would rejoin with its term and vote forgotten.
type diskLoss struct{}

func (diskLoss) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	victims := n.victims(ctx, s)
	if len(victims) == 0 {
		return errors.New("no victim")
	}
	v := victims[0]
	w.Targets = n.c.ID(v)
	w.Start = n.c.Now()
	n.markReplacing(v, true)
	if err := n.c.Kill(v); err != nil {
		return err
	}
	var errs []error
	for _, d := range []struct {
		damage string
		want   []string
	}{{LoseRaftDB, []string{refusedLost}}, {WipeDataDir, []string{refusedForeign, refusedMember}}} {
		if _, err := n.c.Damage(v, d.damage); err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, n.expectRefusal(ctx, v, d.damage, d.want))
	}
	w.Detail = "lost raft.db and data dir refused"
	sleep(ctx, hold)
	if err := n.replace(context.WithoutCancel(ctx), v); err != nil {
		errs = append(errs, err)
	} else {
		w.Detail += ", replaced (remove, empty data dir, --join)"
	}
	return errors.Join(errs...)
}

// storageDamage damages a killed member's data dir in one of DamageKinds
// and restarts it. The member must either refuse with one clear line (then
// it is replaced) or, when the damage missed everything that matters, start
// and catch up; a panic, a crash or a hang is a violation.
type storageDamage struct{}

func (storageDamage) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	victims := n.victims(ctx, s)
	if len(victims) == 0 {
		return errors.New("no victim")
	}
	v := victims[0]
	w.Targets = n.c.ID(v)
	w.Start = n.c.Now()
	n.markReplacing(v, true)
	if err := n.c.Kill(v); err != nil {
		return err
	}
	kinds := DamageKinds
	if n.c.LogStore(v) == "wal" {
		kinds = WALDamageKinds
	}
	kind := kinds[s.SubSeed%uint64(len(kinds))]
	res, err := n.c.Damage(v, kind)
	w.Detail = kind + ": " + res.Detail
	if err != nil {
		return err
	}
	sleep(ctx, hold)
	exited, out, err := n.c.TryStart(v, refusalWait)
	if err != nil {
		return err
	}
	if !exited && res.LosesStored {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		served := n.c.WaitReady(rctx, v, 10*time.Second) == nil
		cancel()
		if served {
			n.violation("%s served a data dir that lost log entries it had stored durably (%s: %s) instead of refusing it",
				n.c.ID(v), kind, res.Detail)
		}
		return n.replace(context.WithoutCancel(ctx), v)
	}
	if !exited {
		if err := n.c.WaitReady(context.WithoutCancel(ctx), v, n.ready(30*time.Second)); err != nil {
			n.violation("%s started on a data dir with %s but never became ready: %v", n.c.ID(v), kind, err)
			_ = n.c.Kill(v)
			return n.replace(context.WithoutCancel(ctx), v)
		}
		w.Detail += "; damage missed, member started"
		n.markReplacing(v, false)
		return nil
	}
	if _, ok := lineWith(out, refusedDamaged, refusedLost); !ok {
		n.violation("%s exited on a data dir with %s without a clear refusal: %q", n.c.ID(v), kind, lastLine(out))
	}
	w.Detail += "; refused"
	if err := n.replace(context.WithoutCancel(ctx), v); err != nil {
		return err
	}
	w.Detail += ", replaced"
	return nil
}

// expectRefusal restarts the stopped member v as before and checks that it
// refuses with a line containing one of want. A member that serves instead is a
// violation; one that neither exits nor serves is stopped.
func (n *Nemesis) expectRefusal(ctx context.Context, v int, damage string, want []string) error {
	exited, out, err := n.c.TryStart(v, refusalWait)
	if err != nil {
		return err
	}
	if exited {
		if _, ok := lineWith(out, want...); !ok {
			n.violation("%s, restarted after %s, exited without the expected refusal (%q): %q", n.c.ID(v), damage, want, lastLine(out))
		}
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n.c.WaitReady(rctx, v, 10*time.Second) == nil {
		n.violation("%s, restarted after %s, was accepted back into the cluster instead of refusing", n.c.ID(v), damage)
	}
	return n.c.Kill(v)
}

// lineWith returns the first line of out that contains one of want.
func lineWith(out string, want ...string) (string, bool) {
	for _, line := range strings.Split(out, "\n") {
		for _, w := range want {
			if strings.Contains(line, w) {
				return line, true
			}
		}
	}
	return "", false
}

// lastLine is the last non-empty line of out.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// replace follows the documented procedure for a member that lost its
// disk: remove it from the configuration, empty its data dir, start it with
// --join. Bounded; safe to repeat.
func (n *Nemesis) replace(ctx context.Context, v int) error {
	id := n.c.ID(v)
	if err := n.c.Kill(v); err != nil {
		return err
	}
	var err error
	for attempt := 0; attempt < 10; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		_, err = n.admin.RemoveMember(cctx, id)
		cancel()
		if err == nil || status.Code(err) == codes.NotFound {
			err = nil
			break
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("replace %s: remove: %w", id, err)
	}
	if _, err := n.c.Damage(v, WipeDataDir); err != nil {
		return err
	}
	if err := n.c.StartJoining(v); err != nil {
		return err
	}
	if err := n.c.WaitReady(ctx, v, n.ready(60*time.Second)); err != nil {
		return fmt.Errorf("replace %s: %w", id, err)
	}
	n.markReplacing(v, false)
	return nil
}

func (n *Nemesis) markReplacing(v int, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if on {
		n.replacing[v] = true
	} else {
		delete(n.replacing, v)
	}
}

func (n *Nemesis) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.violations = append(n.violations, msg)
	n.mu.Unlock()
	n.c.Logf("STORAGE VIOLATION: %s", msg)
}

// Violations lists the storage-safety violations the storage faults saw: a
// member that came back on a data dir it should have refused, or that
// crashed instead of refusing damaged storage.
func (n *Nemesis) Violations() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.violations...)
}
