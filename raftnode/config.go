package raftnode

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	"github.com/coordd/coordd/raftnode/datadir"
)

// DefaultHeartbeatTimeout is the raft heartbeat timeout of a member that
// sets none; its election and step-down timeouts default to the same
// value (docs/operations.md#raft-timeouts). On the project's 2-core
// machine at load 17-43 from other work, nothing injected, 200 ms timeouts
// (the earlier defaults) gave 35 elections in 39 minutes and 400 ms gave 2,
// while failover under that load went from a median of 0.59 s to 1.2 s
// (bench/RESULTS.md "Leadership on a busy machine"). A leader's step-down
// timeout equal to the heartbeat timeout loses nothing: no follower starts
// an election before it has missed the leader for a heartbeat timeout
// anyway, and the read lease is separate (leaseFor).
const DefaultHeartbeatTimeout = 400 * time.Millisecond

// Config describes one raft member. Zero durations take the defaults below.
type Config struct {
	ID       string // stable member ID
	DataDir  string // raft.db, wal/ (the raft-wal log store) and snapshots/ live here
	RaftAddr string // bind and advertised address of the raft transport

	HeartbeatTimeout   time.Duration // default DefaultHeartbeatTimeout
	ElectionTimeout    time.Duration // default HeartbeatTimeout; must be >= it
	LeaderLeaseTimeout time.Duration // default HeartbeatTimeout; must be <= it
	CommitTimeout      time.Duration // default 20ms
	SnapshotInterval   time.Duration // default 30s
	SnapshotThreshold  uint64        // default 8192 entries
	TrailingLogs       uint64        // default 10240 entries
	MaxAppendEntries   int           // default 256
	// LogStore is where the log entries live: datadir.LogStoreBolt
	// (raft.db) or datadir.LogStoreWAL (raft-wal segments under wal/).
	// Empty: whatever the data dir records, datadir.DefaultLogStore
	// (raft-wal) for a new one. A data dir records its store when it is
	// first opened; asking for the other one is refused
	// (datadir.LogStoreMismatchError).
	LogStore string
	// WALSegmentSize is the size raft-wal preallocates each segment to
	// (0: raft-wal's default, 64 MiB). Tests use small ones.
	WALSegmentSize int
	// BoltOptions, when set, adjusts the options raft.db is opened with
	// (datadir's boltOptions: no synced freelist, hashmap freelist); benchmarks
	// compare bolt's settings with it.
	BoltOptions func(*bolt.Options)

	// MaxInflightEntries is how many log entries the batcher keeps with
	// raft at once (default MaxInflightEntries).
	MaxInflightEntries int
	ApplyTimeout       time.Duration // enqueue timeout for one entry, default 5s

	// LeaderLease, when positive, lets the established leader confirm its
	// leadership (VerifyLeader: linearizable reads, allocations) from its
	// clock for this long after an entry it submitted commits, instead of
	// a quorum round per call, and makes Open wait this long before it
	// starts raft (see leaderLease). It must be below HeartbeatTimeout, and
	// every member must run the same HeartbeatTimeout. 0: off.
	LeaderLease time.Duration

	// MaxPendingProposals bounds the proposals waiting for the batcher;
	// past it Propose refuses a caller's proposal with *OverloadedError
	// (default DefaultMaxPendingProposals).
	MaxPendingProposals int

	// StateBudget is the memory guard's budget (state_budget.go): once
	// the state's estimated encoded size reaches it, commands that grow
	// the state (commands.Grows) are refused with *StateBudgetError before
	// they are proposed. 0: off (docs/operations.md#memory-guard).
	StateBudget int64
	// StateMeasureInterval is how old the guard's last full measurement
	// of the state may grow before the next one starts (default
	// DefaultStateMeasureInterval).
	StateMeasureInterval time.Duration
	// StateClock is the guard's clock (default time.Now); tests inject
	// one to decide when measurements are due.
	StateClock func() time.Time

	// AddressProvider, when set, resolves peer IDs to dial addresses (the
	// Jepsen-style tests route every link through a fault proxy with it).
	AddressProvider raft.ServerAddressProvider

	// Transport, when set, replaces the TCP transport (in-process tests use
	// raft.NewInmemTransport to partition members without sockets).
	Transport raft.Transport

	// Storage, when set, is the member's data dir already opened and
	// checked by OpenStorage (a server opens it before binding any port);
	// otherwise Open opens DataDir itself.
	Storage *datadir.Storage

	// TLS, when set, runs the TCP transport over mutual TLS that admits
	// only peers with the server identity (docs/security.md).
	TLS *RaftTLS

	// TestOnlySkipIdentityCheck turns off the refusal of a data dir that
	// lost its raft state and the cluster-ID check on raft connections, so
	// the Jepsen-style suite can show that its disk-loss scenario catches a
	// member without them. Never set it in production.
	TestOnlySkipIdentityCheck bool

	// FaultInjection enables Node.SetRaftDelay, which holds received raft
	// RPCs of a kind for a while (the Jepsen-style suite's raft-delay
	// nemesis). Off in production.
	FaultInjection bool

	Logger hclog.Logger
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.ElectionTimeout, c.HeartbeatTimeout)
	def(&c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	def(&c.CommitTimeout, 20*time.Millisecond)
	def(&c.SnapshotInterval, 30*time.Second)
	def(&c.ApplyTimeout, 5*time.Second)
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.MaxPendingProposals <= 0 {
		c.MaxPendingProposals = DefaultMaxPendingProposals
	}
	if c.MaxInflightEntries <= 0 {
		c.MaxInflightEntries = MaxInflightEntries
	}
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = 256
	}
	if c.StateClock == nil {
		c.StateClock = time.Now
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c
}

// raftConfig builds and validates the hashicorp/raft configuration.
func (c Config) raftConfig(notify chan bool) (*raft.Config, error) {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.ID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = c.CommitTimeout
	rc.SnapshotInterval = c.SnapshotInterval
	rc.SnapshotThreshold = c.SnapshotThreshold
	rc.TrailingLogs = c.TrailingLogs
	rc.MaxAppendEntries = c.MaxAppendEntries
	rc.NotifyCh = notify
	rc.Logger = c.Logger.Named("raft")
	// Restoring committed logs on start needs a log store that can serve
	// raft's RestoreCommittedLogs; raft-boltdb cannot, so keep it off.
	rc.NoSnapshotRestoreOnStart = false
	if c.LeaderLease < 0 || c.LeaderLease >= c.HeartbeatTimeout && c.LeaderLease > 0 {
		return nil, fmt.Errorf("raft config: leader lease %v must be below the heartbeat timeout %v", c.LeaderLease, c.HeartbeatTimeout)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("raft config: %w", err)
	}
	return rc, nil
}
