package nemesis

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/proxy"
)

// Kind names a fault.
type Kind string

const (
	// Network faults (raft links, through the proxies).
	IsolateLeader Kind = "isolate-leader"    // cut the leader from everyone, both directions
	SplitMajority Kind = "majority-minority" // random split into a majority and a minority
	OneWay        Kind = "one-way"           // cut one direction only (leader's outbound or inbound links)
	Flapping      Kind = "flapping"          // a random set of links toggles on and off
	DelayLinks    Kind = "delay"             // every link slowed by fixed + jitter
	// Process faults.
	KillNode   Kind = "kill"            // SIGKILL a member (leader or not), restart it later
	PauseNode  Kind = "pause"           // SIGSTOP a member longer than the election timeout, then SIGCONT
	Transfer   Kind = "transfer-leader" // leadership transfer through the API
	RemoveAdd  Kind = "remove-readd"    // remove a follower from the configuration, then add it back
	RestartAll Kind = "restart-all"     // SIGKILL every member at once, restart them all
	// KillLeader always SIGKILLs the leader (not in AllKinds: KillNode
	// already hits the leader half the time). Used where every fault must
	// change the leader, e.g. the broken-server scenario.
	KillLeader Kind = "kill-leader"
	// ClientCut blackholes (or resets) the client proxies in front of a
	// random minority's gRPC addresses, or of the leader's, so workload
	// clients lose those members while raft stays intact. Not in AllKinds,
	// so the scenarios drawing from AllKinds keep their schedules; the
	// matrices add it where wanted.
	ClientCut Kind = "client-cut"
	// Storage faults (on a killed member's data dir). Not in AllKinds: the
	// storage scenarios name them.
	DiskLoss      Kind = "disk-loss"      // raft.db, then the whole data dir lost: refused, then replaced
	StorageDamage Kind = "storage-damage" // raft.db or snapshots damaged: refused and replaced, or harmless
)

// StorageKinds are the faults on members' data dirs.
var StorageKinds = []Kind{DiskLoss, StorageDamage}

// ClientKinds are the faults on client links (the gRPC path).
var ClientKinds = []Kind{ClientCut}

// AllKinds lists every fault kind.
var AllKinds = []Kind{IsolateLeader, SplitMajority, OneWay, Flapping, DelayLinks,
	KillNode, PauseNode, Transfer, RemoveAdd, RestartAll}

// NetworkKinds and ProcessKinds group the kinds.
var (
	NetworkKinds = []Kind{IsolateLeader, SplitMajority, OneWay, Flapping, DelayLinks}
	ProcessKinds = []Kind{KillNode, PauseNode, Transfer, RemoveAdd, RestartAll}
)

// Cluster is what the nemesis drives (harness.Cluster implements it).
type Cluster interface {
	N() int
	ID(i int) string
	Spec(i int) client.MemberSpec
	Link(from, to int) *proxy.Proxy
	// ClientLink is the proxy in front of member i's gRPC address that
	// workload clients dial.
	ClientLink(i int) *proxy.Proxy
	// HealNetwork sets every raft link and every client link to pass.
	HealNetwork()
	Leader(ctx context.Context) (int, error)
	Kill(i int) error
	Start(i int) error
	Pause(i int) error
	Resume(i int) error
	WaitReady(ctx context.Context, i int, timeout time.Duration) error
	// Damage applies one of the storage faults (LoseRaftDB, WipeDataDir,
	// DamageKinds, WALDamageKinds) to stopped member i's data dir and says
	// what it did.
	Damage(i int, damage string) (DamageResult, error)
	// LogStore is the log store of stopped member i's data dir ("wal" or
	// "bolt").
	LogStore(i int) string
	// TryStart starts member i as Start does and waits up to within: if it
	// exits, exited is true and line is the last line it wrote (and the
	// exit is not a crash); otherwise it keeps running as after Start.
	TryStart(i int, within time.Duration) (exited bool, output string, err error)
	// StartJoining starts member i with --join (through the other members)
	// instead of --peers, from now on: a replacement member.
	StartJoining(i int) error
	Endpoints(first int) []string
	Now() int64
	Logf(format string, args ...any)
}

// Config is a nemesis schedule's parameters.
type Config struct {
	Seed  uint64
	Kinds []Kind
	// First are scheduled before anything drawn from Kinds, in this order
	// (so a short run is sure to include them).
	First []Kind
	// Duration bounds the fault phase; MaxFaults bounds its count.
	Duration  time.Duration
	MaxFaults int
	// Quiet is the range of healthy time before each fault.
	QuietMin, QuietMax time.Duration
	// Hold is the range of time a fault stays in place.
	HoldMin, HoldMax time.Duration
	// ElectionTimeout of the members: pauses last at least 3 times this.
	ElectionTimeout time.Duration
	// ReadyTimeout, when positive, is how long a member may take to serve
	// again after a restart, a re-add or a replacement, where it is longer
	// than the defaults (30 s to restart, 60 s to replace or heal): a
	// member loading or installing a large state (the scale templates)
	// takes seconds to tens of seconds on a loaded box. Zero keeps the
	// defaults.
	ReadyTimeout time.Duration
}

// Step is one planned fault.
type Step struct {
	Kind  Kind          `json:"kind"`
	Quiet time.Duration `json:"quiet"`
	Hold  time.Duration `json:"hold"`
	// Role parameters, resolved at run time.
	TargetLeader bool          `json:"target_leader,omitempty"` // kill/pause/split: hit the leader
	Follower     int           `json:"follower,omitempty"`      // which follower (index among followers)
	Count        int           `json:"count,omitempty"`         // members hit (kill/pause/client-cut on 5 nodes)
	Reset        bool          `json:"reset,omitempty"`         // network cut as Reset instead of Blackhole
	Variant      int           `json:"variant,omitempty"`       // one-way: 0 leader's outbound, 1 inbound, 2 leader to one follower
	Delay        time.Duration `json:"delay,omitempty"`
	Jitter       time.Duration `json:"jitter,omitempty"`
	Period       time.Duration `json:"period,omitempty"` // flapping toggle period
	Perm         []int         `json:"perm,omitempty"`   // member permutation for splits and client cuts
	SubSeed      uint64        `json:"sub_seed,omitempty"`
}

// Plan draws the schedule from the seed.
func Plan(cfg Config, n int) []Step {
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656d65736973))
	between := func(lo, hi time.Duration) time.Duration {
		if hi <= lo {
			return lo
		}
		return lo + time.Duration(rng.Int64N(int64(hi-lo)))
	}
	var steps []Step
	var total time.Duration
	bag := append([]Kind(nil), cfg.First...) // then every kind once, in random order, before any repeats
	for len(steps) < cfg.MaxFaults {
		if len(bag) == 0 {
			bag = append(bag, cfg.Kinds...)
			rng.Shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		s := Step{Kind: bag[0]}
		bag = bag[1:]
		s.Quiet = between(cfg.QuietMin, cfg.QuietMax)
		s.Hold = between(cfg.HoldMin, cfg.HoldMax)
		s.TargetLeader = rng.IntN(2) == 0
		s.Follower = rng.IntN(max(1, n-1))
		s.Count = 1
		if n >= 5 && rng.IntN(3) == 0 {
			s.Count = (n - 1) / 2
		}
		s.Reset = rng.IntN(4) == 0
		s.Variant = rng.IntN(3)
		s.Perm = rng.Perm(n)
		s.SubSeed = rng.Uint64()
		switch s.Kind {
		case DelayLinks:
			s.Delay = between(20*time.Millisecond, 200*time.Millisecond)
			s.Jitter = between(0, 50*time.Millisecond)
		case Flapping:
			s.Period = between(100*time.Millisecond, 600*time.Millisecond)
		case PauseNode:
			if min := 3 * cfg.ElectionTimeout; s.Hold < min {
				s.Hold = min
			}
		case Transfer:
			s.Hold = 0
		case KillLeader:
			s.TargetLeader, s.Count = true, 1
		}
		steps = append(steps, s)
		total += s.Quiet + s.Hold
		if total >= cfg.Duration {
			break
		}
	}
	return steps
}
