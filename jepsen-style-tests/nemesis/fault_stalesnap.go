package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// StaleSnapshot cuts one follower off until the leader has compacted its
// log past it (tiny snapshots, small raft-wal segments), heals it so that it
// catches up by InstallSnapshot, and then delivers to every follower,
// again, the last InstallSnapshot it received (coordd --fault-injection,
// POST /debug/replay-snapshot), re-stamped with the current term and
// leader: what an overtaken replication stream or a retransmitting link
// delivers after the member has moved on. A member must refuse a snapshot below its applied index, and one
// its log already holds with entries after it (raftnode/stale_snapshot.go);
// one that installs a snapshot below its applied index is a violation, and
// anything else a wrong install does (a crash, a lost or diverging entry)
// the checkers see. Not in AllKinds (members need the flag); the matrices
// name it, after faults that make members catch up by snapshot.
const StaleSnapshot Kind = "stale-snapshot"

// SnapshotReplayer is a Cluster whose members can replay a snapshot
// (harness.Cluster implements it).
type SnapshotReplayer interface {
	ReplaySnapshot(ctx context.Context, i int) (Replay, error)
}

// Replay is what a member did with a replayed snapshot (raftnode's
// SnapshotReplay, read from JSON; the nemesis does not link raftnode).
type Replay struct {
	Index   uint64 `json:"index"`
	Applied uint64 `json:"applied_index"`
	Last    uint64 `json:"last_index"`
	Refused bool   `json:"refused"`
	Answer  string `json:"answer"`
}

// ErrNoSnapshotYet: the member has received no snapshot to replay.
var ErrNoSnapshotYet = errors.New("no snapshot received yet")

func init() { faults[StaleSnapshot] = staleSnapshot{} }

type staleSnapshot struct{}

func (staleSnapshot) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	rp, ok := n.c.(SnapshotReplayer)
	if !ok {
		return errors.New("the cluster cannot replay snapshots")
	}
	l := n.leader(ctx)
	fs := n.followers(l)
	if l < 0 || len(fs) == 0 {
		return errors.New("no leader or no follower")
	}
	w.Start = n.c.Now()
	lagger := fs[s.Follower%len(fs)]
	others := append([]int{l}, fs...)
	others = slices.DeleteFunc(others, func(i int) bool { return i == lagger })
	// Reset, not blackholed: the leader's stream to it reconnects at once
	// after the heal instead of waiting out a stalled connection.
	n.cut([]int{lagger}, others, true)
	n.cut(others, []int{lagger}, true)
	sleep(ctx, max(hold, staleSnapshotLag))
	n.c.HealNetwork()
	var targets, parts []string
	for _, f := range fs {
		if n.isRemoved(f) {
			continue
		}
		targets = append(targets, n.c.ID(f))
		got, err := rp.ReplaySnapshot(ctx, f)
		// The lagger may still be catching up (no snapshot yet, or no
		// leader heard since the heal): wait for it; any member may be
		// between leaders for a moment.
		retry := func(err error) bool {
			return err != nil && (f == lagger || !errors.Is(err, ErrNoSnapshotYet))
		}
		for deadline := time.Now().Add(staleSnapshotWait); retry(err) && time.Now().Before(deadline); {
			if !sleep(ctx, 200*time.Millisecond) {
				break
			}
			got, err = rp.ReplaySnapshot(ctx, f)
		}
		switch {
		case errors.Is(err, ErrNoSnapshotYet):
			parts = append(parts, n.c.ID(f)+": none received")
		case err != nil:
			parts = append(parts, fmt.Sprintf("%s: %v", n.c.ID(f), err))
		case !got.Refused && got.Index < got.Applied:
			n.violation("%s installed a replayed snapshot at index %d below its applied index %d", n.c.ID(f), got.Index, got.Applied)
			parts = append(parts, fmt.Sprintf("%s: INSTALLED %d below applied %d", n.c.ID(f), got.Index, got.Applied))
		case got.Refused:
			parts = append(parts, fmt.Sprintf("%s: %d refused (applied %d, last %d)", n.c.ID(f), got.Index, got.Applied, got.Last))
		default:
			parts = append(parts, fmt.Sprintf("%s: %d installed (applied %d, last %d)", n.c.ID(f), got.Index, got.Applied, got.Last))
		}
	}
	w.Targets = strings.Join(targets, ",")
	w.Detail = fmt.Sprintf("%s cut off %v, then replayed: %s", n.c.ID(lagger), max(hold, staleSnapshotLag), strings.Join(parts, "; "))
	return nil
}

// How long stale-snapshot cuts its follower off (at least), and waits for
// it to receive a snapshot after the heal.
const (
	staleSnapshotLag  = 3 * time.Second
	staleSnapshotWait = 10 * time.Second
)
