package jepsen

import (
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
	"github.com/coordd/coordd/jepsen-style-tests/scenario"
	"github.com/coordd/coordd/jepsen-style-tests/workload"
)

// The hostile-client scenarios: the write path and broadcasts while a
// client holding the wrong credentials (read, proxy, admin, another
// streaming node) forges checkpoints, broadcast acks, binlog paths and
// Removes (nemesis/hostile.go). Kept in their own file so matrix.go only
// names them.

// HostileWorkloads are the write path plus broadcasts (acks to forge).
// The final flush gets 30 s: one forged checkpoint that lands keeps it
// from ever completing, and the run should say so quickly. The broadcasts
// target the VChannels of collection 200 (hostileBroadcastCollection), so
// the claim writer's inserts land in the VChannels whose broadcast IDs
// they claim (nemesis/claim.go).
func HostileWorkloads(int) []workload.Workload {
	return []workload.Workload{&workload.Flush{FinalWait: 30 * time.Second}, &workload.Broadcast{NClients: 2, PChannels: 3, AckSyncUp: true,
		Collection: hostileBroadcastCollection, ClaimPrefix: nemesis.HostilePrefix + "claim-"}}
}

// hostileBroadcastCollection is the broadcast workload's collection in the
// hostile scenarios; the flush workload's is 1000 or above.
const hostileBroadcastCollection = 200

// hostileFaults are coordd faults that move no PChannel by themselves, so
// pchannel-owned judges what the forged calls did.
var hostileFaults = []nemesis.Kind{nemesis.KillNode, nemesis.Transfer}

// hostileSmoke is the smoke matrix's hostile scenario.
func hostileSmoke() []scenario.Scenario {
	return []scenario.Scenario{{
		Name: "smoke-hostile-3", Nodes: 3, Faults: hostileFaults, Duration: 16 * time.Second, Recovery: 5 * time.Second,
		ExtraArgs: scenario.FlushArgs, StreamingNodes: 2, StreamingArgs: scenario.FlushStreamingArgs, Hostile: true, HostileClaims: true,
		Workloads: HostileWorkloads,
	}, brokenHostile()}
}

// brokenHostile is a test of the tests for the hostile nemesis: the
// streaming nodes run --test-only-unsafe-accept-any-remove (a Remove coordd
// never decided is obeyed), and the nemesis forges only Removes. The run
// passes only if hostile-refused catches an accepted one. It runs
// insecure: on a secure cluster the node's port takes a Remove only from
// coordd's server identity, which no hostile credential holds, so the
// broken check behind it would never be reached.
func brokenHostile() scenario.Scenario {
	return scenario.Scenario{
		Name: "smoke-broken-hostile-3", Nodes: 3, Faults: []nemesis.Kind{nemesis.Transfer}, Duration: 8 * time.Second,
		Recovery: 2 * time.Second, ExtraArgs: scenario.ChannelArgs, StreamingNodes: 2,
		StreamingArgs: []string{"--test-only-unsafe-accept-any-remove"}, Hostile: true, HostileKinds: []string{nemesis.ForgeRemove},
		ExpectViolation: true, ExpectChecker: "hostile-refused", Insecure: true,
		Workloads: func(int) []workload.Workload {
			return []workload.Workload{&workload.Broadcast{NClients: 2, PChannels: 3}}
		},
	}
}

// hostileTemplates are the full matrix's hostile templates.
func hostileTemplates(d time.Duration) []scenario.Scenario {
	return []scenario.Scenario{{
		Name: "hostile-3", Nodes: 3, Faults: append(append([]nemesis.Kind(nil), hostileFaults...), nemesis.PauseNode, nemesis.IsolateLeader),
		Duration: d, Recovery: 5 * time.Second, ExtraArgs: scenario.FlushArgs, StreamingNodes: 2, StreamingArgs: scenario.FlushStreamingArgs,
		Hostile: true, HostileClaims: true, Workloads: HostileWorkloads,
	}}
}
