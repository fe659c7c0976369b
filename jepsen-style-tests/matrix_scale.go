package jepsen

import (
	"time"

	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/jepsen-style-tests/scenario"
)

// ScaleRuns is how many rounds of the full matrix include the scale
// templates (the first ones): a run of one takes minutes, not the other
// templates' tens of seconds, so nine of them would add most of an hour.
const ScaleRuns = 3

// scaleArgs snapshot often enough at 100k segments that members which fall
// behind catch up by installing the whole state (every 32 entries, 4 kept
// behind, checked every second), without snapshotting tens of MB several
// times a second as the tiny thresholds would; on raft-wal with 4 KiB
// segments, so that the log is compacted at all (raft-wal drops whole
// segments).
var scaleArgs = []string{"--snapshot-threshold", "32", "--trailing-logs", "4", "--snapshot-interval", "1s",
	"--raft-log-store", "wal", "--raft-wal-segment-size", "4096"}

// scaleTemplates are the templates at scale (issue 35): the members start
// from a preloaded state of 100k segments (fsm.Synthetic, as bench/scale
// seeds it; docs/scaling.md#milvus-max), restored into the first member
// and installed by snapshot into the others, so every snapshot, install
// and restart moves and decodes tens of MB. Kills, restarts of every
// member, partitions and a member replacement (disk loss: refused, then
// removed, wiped and joined again, catching up by snapshot install), with
// the allocator workload and every checker. Member waits are scaled to
// the state explicitly (ReadyTimeout, SnapshotTimeout), not loosened
// elsewhere.
func scaleTemplates() []scenario.Scenario {
	return []scenario.Scenario{
		{Name: "scale-100k-3", Nodes: 3,
			// A replacement and a kill first: at this size a fault takes
			// 10-18 s, so the 40 s see three or four, and drawn
			// replacements crowded kills out of most runs.
			FirstFaults: []nemesis.Kind{nemesis.DiskLoss, nemesis.KillNode},
			Faults:      []nemesis.Kind{nemesis.KillNode, nemesis.RestartAll, nemesis.IsolateLeader, nemesis.SplitMajority},
			Duration:    40 * time.Second, Recovery: 5 * time.Second,
			// Faults held 4-10 s: the allocators commit 5-8 entries a
			// second, so a member cut off or killed that long may fall
			// behind the leader's compacted log (raft-wal keeps whole 4 KiB
			// segments: in the measured runs such members caught up from
			// the log, and the installs were the joins' and replacements').
			HoldMin: 4 * time.Second, HoldMax: 10 * time.Second,
			ExtraArgs: scaleArgs,
			Preload:   &fsm.SyntheticShape{Segments: 100_000, VChannels: 10_000, PChannels: 16, ManifestPointers: true},
			// A join's install took 1.5-6.7 s and a restart's restore up
			// to 8.7 s at load 6-24 (README.md, "At scale"); 3 min leaves
			// room for a far busier box without loosening other templates.
			ReadyTimeout: 3 * time.Minute, SnapshotTimeout: time.Minute},
	}
}
