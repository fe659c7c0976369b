package jepsen

import (
	"fmt"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/jepsen-style-tests/scenario"
	"github.com/coordd/coordd/jepsen-style-tests/workload"
)

// Process faults without the membership change (which gets its own
// scenario, with tiny snapshots so the re-added member catches up by
// snapshot install).
var processFaults = []nemesis.Kind{nemesis.KillNode, nemesis.PauseNode, nemesis.Transfer, nemesis.RestartAll}

var storageFaults = []nemesis.Kind{nemesis.DiskLoss, nemesis.StorageDamage, nemesis.KillNode}

// walStorageArgs run the storage templates on the default log store with
// tiny snapshots (so members catch up by snapshot) and fault injection
// (for stale-snapshot).
var walStorageArgs = append(append([]string(nil), scenario.WALTinySnapshots...), nemesis.FaultInjectionArgs...)

var memberFaults = []nemesis.Kind{nemesis.RemoveAdd, nemesis.KillNode, nemesis.IsolateLeader, nemesis.Transfer}

// Smoke is the matrix `go test` runs: four short scenarios, every fault
// kind at least once, the broken-build checks, the channel workload and
// the write-path (flush) and manifest-commit workloads.
func Smoke() []scenario.Scenario {
	d := 16 * time.Second
	smoke := []scenario.Scenario{
		{Name: "smoke-net-3", Nodes: 3, Faults: nemesis.NetworkKinds, Duration: d},
		{Name: "smoke-proc-3", Nodes: 3, Faults: processFaults, Duration: d},
		{Name: "smoke-member-snap-3", Nodes: 3, Faults: memberFaults, Duration: d, ExtraArgs: scenario.TinySnapshots},
		// Client links too: client-cut first, so the short run always has one.
		{Name: "smoke-mixed-5", Nodes: 5, Faults: withClientCut(nemesis.AllKinds), FirstFaults: nemesis.ClientKinds, Duration: d},
		// Storage faults on the default log store (raft-wal): a member loses
		// raft.db, then its whole data dir, and is replaced; its wal/,
		// log-reach, raft.db or snapshots get damaged on a restart (a
		// damage drawn from nemesis.WALDamageKinds by the run's seed).
		// The replacement catches up by snapshot, which stale-snapshot then
		// delivers again to every follower; disk-full fills one member's own
		// tmpfs (skipped where mounting is refused).
		{Name: "smoke-storage-3", Nodes: 3, Faults: storageFaults,
			FirstFaults: []nemesis.Kind{nemesis.DiskLoss, nemesis.DiskFull, nemesis.StaleSnapshot, nemesis.StorageDamage}, Duration: 14 * time.Second,
			Recovery: 2 * time.Second, HoldMin: 200 * time.Millisecond, HoldMax: 500 * time.Millisecond, ExtraArgs: walStorageArgs},
		brokenClient(),
		brokenServer(),
		brokenIdentity(),
		brokenFence(),
		brokenOrder(),
		brokenManifestReads(),
		{Name: "smoke-channels-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.KillNode, nemesis.IsolateLeader, nemesis.Transfer},
			Duration: 22 * time.Second, Recovery: 5 * time.Second, ExtraArgs: scenario.ChannelArgs,
			StreamingNodes: 2, StreamingFaults: true, Workloads: scenario.ChannelWorkloads},
		// Broadcasts while operators race incompatible replication updates
		// and abandon pending tasks; the Cluster key must never stay held.
		{Name: "smoke-broadcast-ops-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.KillNode, nemesis.IsolateLeader, nemesis.Transfer},
			Duration: 12 * time.Second, Recovery: 4 * time.Second, ExtraArgs: scenario.ChannelArgs,
			StreamingNodes: 2, Workloads: scenario.BroadcastOpsWorkloads},
		// The write path: inserts and flushes while coordd members and
		// streaming nodes are killed, paused and cut off.
		{Name: "smoke-flush-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.KillNode, nemesis.IsolateLeader, nemesis.Transfer},
			Duration: 16 * time.Second, Recovery: 5 * time.Second, ExtraArgs: scenario.FlushArgs,
			StreamingNodes: 2, StreamingFaults: true, StreamingArgs: scenario.FlushStreamingArgs, Workloads: scenario.FlushWorkloads},
		// Manifest commits: concurrent committers per segment while members
		// are killed, paused and cut off; the collector runs throughout.
		{Name: "smoke-manifest-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.KillNode, nemesis.PauseNode, nemesis.IsolateLeader, nemesis.Transfer},
			Duration: 12 * time.Second, Recovery: 3 * time.Second, ExtraArgs: scenario.ManifestArgs, ObjectStore: true,
			Workloads: scenario.ManifestWorkloads},
	}
	smoke = append(smoke, hostileSmoke()...)
	return smoke
}

// withClientCut is kinds plus the client-link faults.
func withClientCut(kinds []nemesis.Kind) []nemesis.Kind {
	return append(append([]nemesis.Kind(nil), kinds...), nemesis.ClientKinds...)
}

// brokenServer is a test of the tests against a deliberately broken
// server: coordd --test-only-unsafe-id-reuse hands out IDs without a
// committed reservation, so IDs repeat after a leader change. Every fault
// kills the leader; the run passes only if the checkers catch the reuse.
func brokenServer() scenario.Scenario {
	return scenario.Scenario{
		Name: "smoke-broken-server-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.KillLeader},
		Duration: 6 * time.Second, Recovery: time.Second, ExpectViolation: true,
		QuietMin: 500 * time.Millisecond, QuietMax: time.Second, HoldMin: 500 * time.Millisecond, HoldMax: time.Second,
		ExtraArgs: []string{"--test-only-unsafe-id-reuse"},
		// ExpectChecker: the violation must come from the ID uniqueness
		// checker, not from something incidental.
		ExpectChecker: "alloc-unique",
	}
}

// brokenIdentity is a test of the tests against a member that does not
// check its identity: coordd --test-only-skip-identity-check starts on a
// data dir that lost its raft.db (with its term and vote). The run passes
// only if the disk-loss fault reports it.
func brokenIdentity() scenario.Scenario {
	return scenario.Scenario{
		Name: "smoke-broken-identity-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.DiskLoss},
		Duration: 2 * time.Second, Recovery: time.Second, ExpectViolation: true, ExpectChecker: "storage-refused",
		QuietMin: 100 * time.Millisecond, QuietMax: 300 * time.Millisecond, HoldMin: 100 * time.Millisecond, HoldMax: 200 * time.Millisecond,
		ExtraArgs: []string{"--test-only-skip-identity-check"},
	}
}

// brokenFence is a test of the tests against deliberately broken
// streaming nodes: --test-only-unsafe-no-fence makes appends ignore the
// WAL fence and the node ignore Remove, so the previous owner of a moved
// PChannel keeps its WAL open at the old term. Streaming nodes are only
// paused, so when a resumed node takes channels back their previous owner
// is alive; the channel workload's zombie client appends there after every
// move. The run passes only if wal-terms-monotonic catches a record
// written past the fence.
func brokenFence() scenario.Scenario {
	return scenario.Scenario{
		// Rare leader transfers: a new leader gives every node a fresh TTL,
		// which would keep paused nodes from being marked down.
		Name: "smoke-broken-fence-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.Transfer},
		QuietMin: 8 * time.Second, QuietMax: 12 * time.Second,
		Duration: 16 * time.Second, Recovery: 2 * time.Second, ExpectViolation: true, ExpectChecker: "wal-terms-monotonic",
		ExtraArgs: scenario.ChannelArgs, StreamingNodes: 2, StreamingFaults: true, StreamingPauseOnly: true,
		StreamingArgs: []string{"--test-only-unsafe-no-fence"},
		Workloads: func(int) []workload.Workload {
			return []workload.Workload{&workload.Channels{NClients: 4, PChannels: 4, Zombies: true}}
		},
	}
}

// brokenOrder is a test of the tests against a deliberately broken
// broadcaster: --test-only-unsafe-broadcast-order releases a task's
// resource keys as soon as it is created, so conflicting broadcasts run
// at once, and delays each append by up to 20 ms, so a later one overtakes
// an earlier one in a VChannel within seconds (without the delay a
// broadcast appended faster than the next one was created, and 3 of 6 runs
// saw no overtaking). The run passes only if broadcast-conflict-order
// catches it.
func brokenOrder() scenario.Scenario {
	return scenario.Scenario{
		Name: "smoke-broken-order-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.Transfer},
		Duration: 10 * time.Second, Recovery: time.Second, ExpectViolation: true, ExpectChecker: "broadcast-conflict-order",
		ExtraArgs:      append(append([]string(nil), scenario.ChannelArgs...), "--test-only-unsafe-broadcast-order"),
		StreamingNodes: 2,
		Workloads: func(int) []workload.Workload {
			return []workload.Workload{&workload.Broadcast{NClients: 12, PChannels: 3}}
		},
	}
}

// brokenClient is a test of the tests through the whole pipeline (real
// cluster, history, checkers, report): one client records stale timestamps,
// as a deposed leader serving from an old window would, and the run passes
// only if the checkers catch it.
func brokenClient() scenario.Scenario {
	return scenario.Scenario{
		Name: "smoke-broken-client-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.IsolateLeader},
		Duration: 4 * time.Second, Recovery: time.Second, ExpectViolation: true,
		// The smoke matrix's explicit insecure variant (--insecure: plaintext,
		// no tokens): the whole pipeline without TLS; every other smoke
		// scenario runs secure.
		Insecure: true,
		Workloads: func(nodes int) []workload.Workload {
			return []workload.Workload{&workload.Alloc{NClients: 2 * nodes, InjectStale: 50}}
		},
	}
}

// brokenManifestReads is a test of the tests for the manifest workload:
// its first reader records, every 10th read, the segment's first version
// again, as a deposed leader serving an old pointer would. The run passes
// only if the manifest linearizability checker catches it.
func brokenManifestReads() scenario.Scenario {
	return scenario.Scenario{
		Name: "smoke-broken-manifest-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.Transfer},
		Duration: 8 * time.Second, Recovery: 3 * time.Second, ExpectViolation: true,
		ExpectChecker: "manifest-linearizable(porcupine)", ExtraArgs: scenario.ManifestArgs, ObjectStore: true,
		Workloads: func(int) []workload.Workload {
			return []workload.Workload{&workload.Manifest{InjectStaleRead: 10}}
		},
	}
}

// FullRuns is how many seeded schedules of each template the full matrix
// runs; every run gets its own seed (the printed base seed plus its index).
const FullRuns = 9

// Full is the matrix JEPSEN_FULL=1 runs: FullRuns rounds of every template
// (at least 100 seeded schedules), 12 s of faults each, named
// <template>-r<round>.
// Rounds come one after the other, so a partial run covers every template.
// Many short schedules explore more fault orders than a few long ones; the
// long-partition template still holds partitions for 5-10 s.
func Full() []scenario.Scenario {
	d := 12 * time.Second
	templates := []scenario.Scenario{
		{Name: "net-3", Nodes: 3, Faults: nemesis.NetworkKinds, Duration: d},
		{Name: "net-5", Nodes: 5, Faults: nemesis.NetworkKinds, Duration: d},
		{Name: "proc-3", Nodes: 3, Faults: processFaults, Duration: d},
		{Name: "proc-5", Nodes: 5, Faults: processFaults, Duration: d},
		{Name: "member-snap-3", Nodes: 3, Faults: memberFaults, Duration: d, ExtraArgs: scenario.TinySnapshots},
		{Name: "member-snap-5", Nodes: 5, Faults: memberFaults, Duration: d, ExtraArgs: scenario.TinySnapshots},
		{Name: "mixed-3-snap", Nodes: 3, Faults: nemesis.AllKinds, Duration: d, ExtraArgs: scenario.TinySnapshots},
		{Name: "storage-3-snap", Nodes: 3, Faults: append(append([]nemesis.Kind(nil), storageFaults...), nemesis.IsolateLeader, nemesis.RemoveAdd),
			Duration: d, ExtraArgs: scenario.TinySnapshots},
		{Name: "mixed-5", Nodes: 5, Faults: withClientCut(nemesis.AllKinds), Duration: d},
		// Long partitions: members fall far behind and need snapshots.
		{Name: "long-partitions-3-snap", Nodes: 3, Faults: []nemesis.Kind{nemesis.IsolateLeader, nemesis.SplitMajority, nemesis.OneWay},
			Duration: d, HoldMin: 5 * time.Second, HoldMax: 10 * time.Second, ExtraArgs: scenario.TinySnapshots},
		// Channel assignment and WAL appends under streaming-node kills and
		// pauses past the TTL, with every coordd fault kind.
		{Name: "channels-3", Nodes: 3, Faults: nemesis.AllKinds, Duration: d, Recovery: 5 * time.Second,
			ExtraArgs: scenario.ChannelArgs, StreamingNodes: 2, StreamingFaults: true, Workloads: scenario.ChannelWorkloads},
		// The write path under every coordd fault kind and streaming-node
		// kills and pauses.
		{Name: "flush-3", Nodes: 3, Faults: nemesis.AllKinds, Duration: d, Recovery: 5 * time.Second,
			ExtraArgs: scenario.FlushArgs, StreamingNodes: 2, StreamingFaults: true, StreamingArgs: scenario.FlushStreamingArgs,
			Workloads: scenario.FlushWorkloads},
		// Raft messages held by kind (a TimeoutNow past its term, slow
		// appends, slow votes) with leadership transfers, kills and
		// partitions.
		{Name: "raft-delay-3", Nodes: 3, Faults: append(append([]nemesis.Kind(nil), nemesis.RaftDelayKinds...), nemesis.Transfer, nemesis.IsolateLeader, nemesis.KillNode),
			FirstFaults: nemesis.RaftDelayKinds, Duration: d, ExtraArgs: nemesis.FaultInjectionArgs},
		// Manifest commits under every coordd fault kind.
		{Name: "manifest-3", Nodes: 3, Faults: nemesis.AllKinds, Duration: d, Recovery: 5 * time.Second,
			ExtraArgs: scenario.ManifestArgs, ObjectStore: true, Workloads: scenario.ManifestWorkloads},
		// The same on a real S3 server (versitygw): revisions are written
		// by conditional PUTs, and the collector lists and deletes there.
		{Name: "manifest-s3-3", Nodes: 3, Faults: nemesis.AllKinds, Duration: d, Recovery: 5 * time.Second,
			ExtraArgs: scenario.ManifestArgs, ObjectStore: true, ObjectStoreS3: true, Workloads: scenario.ManifestWorkloads},
		// The explicit insecure variant (--insecure, plaintext, no tokens);
		// every other template runs secure.
		{Name: "proc-3-insecure", Nodes: 3, Faults: processFaults, Duration: d, Insecure: true},
		// The raft-wal log store (the default; the *-snap templates above run
		// on bolt, TinySnapshots) with the faults that touch storage: every
		// coordd fault kind with disk loss and damage and tiny snapshots, and
		// the membership faults and disk loss that make members catch up by
		// snapshot (a replacement on an empty wal, a removed member re-added).
		{Name: "wal-3-snap", Nodes: 3, Faults: append(append([]nemesis.Kind(nil), nemesis.AllKinds...), nemesis.DiskLoss, nemesis.StorageDamage),
			Duration: d, ExtraArgs: scenario.WALTinySnapshots},
		// The storage faults alone on raft-wal, every one of them first:
		// each wal/ and log-reach damage is drawn in turn by the round.
		{Name: "wal-storage-3-snap", Nodes: 3,
			Faults:      append(append([]nemesis.Kind(nil), storageFaults...), nemesis.IsolateLeader, nemesis.RemoveAdd, nemesis.StaleSnapshot, nemesis.DiskFull),
			FirstFaults: []nemesis.Kind{nemesis.DiskFull, nemesis.StorageDamage, nemesis.DiskLoss, nemesis.StaleSnapshot, nemesis.StorageDamage}, Duration: d,
			ExtraArgs: walStorageArgs},
		{Name: "wal-member-snap-3", Nodes: 3, Faults: append(append([]nemesis.Kind(nil), memberFaults...), nemesis.DiskLoss),
			Duration: d, ExtraArgs: scenario.WALTinySnapshots},
	}
	templates = append(templates, hostileTemplates(d)...)
	var out []scenario.Scenario
	for r := 1; r <= FullRuns; r++ {
		ts := templates
		if r <= ScaleRuns {
			ts = append(ts[:len(ts):len(ts)], scaleTemplates()...)
		}
		for _, t := range ts {
			t.Name = fmt.Sprintf("%s-r%02d", t.Name, r)
			out = append(out, t)
		}
	}
	return out
}

// Find looks a scenario up by name in both matrices.
func Find(name string) (scenario.Scenario, bool, bool) {
	for _, s := range Smoke() {
		if s.Name == name {
			return s, false, true
		}
	}
	for _, s := range Full() {
		if s.Name == name {
			return s, true, true
		}
	}
	return scenario.Scenario{}, false, false
}
