package balancer

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/balancer/policy"
	"github.com/coordd/coordd/controller/pacing"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// downNodeRemoveTimeout bounds the best-effort Remove sent to a DOWN node.
const downNodeRemoveTimeout = 500 * time.Millisecond

// Leader is what the balancer needs from the raft node.
// raftnode.Node implements it.
type Leader interface {
	// State is the newest state applied on this node: immutable, never nil,
	// and possibly behind the leader's commit index. Guards that matter run
	// again inside Apply, so a decision read from it may be stale but never
	// unsafe.
	State() *fsm.State
	// StateChanged returns a channel closed when a state newer than the
	// current one is published. Take it before reading State, so a change
	// that lands in between is not missed.
	StateChanged() <-chan struct{}
	// Propose commits a command; see commands.Proposer for its error
	// contract. The routine proposes through the proposer raftnode hands
	// it instead (Run), as decisions of its term.
	commands.Proposer
	// EstablishedTerm is the raft term this node leads in once it has
	// committed LeaderEstablished for it, or 0 when it does not lead (or not
	// yet). It may drop to 0 at any moment; a non-zero value is a hint, not a
	// lease (docs/architecture.md#leader-routines).
	EstablishedTerm() uint64
}

// Health says which nodes may hold channels.
type Health interface {
	// Healthy reports whether node may hold channels now.
	Healthy(node uint64) bool
	// Changed returns a channel closed when some node's health may have
	// changed; take it before reading Healthy.
	Changed() <-chan struct{}
}

// Config tunes the balancer.
type Config struct {
	// Streaming bootstrap: the first leader creates these PChannels.
	ClusterID      string // default "by-dev"
	PChannelPrefix string // default "by-dev-rootcoord-dml"
	PChannels      int    // default 16

	Interval       time.Duration // periodic round, default 1m
	BackoffInitial time.Duration // default 10ms
	BackoffMax     time.Duration // default 5s
	RPCTimeout     time.Duration // per Assign/Remove call, default 10s
	MaxParallel    int           // channels applied concurrently, default 64
	PolicyName     string        // default "vchannelFair"
	Policy         policy.Config
	// Clock reads the time and runs the round and backoff timers; default
	// the real clock. Tests pass a fake and advance it.
	Clock           clockwork.Clock
	Logger          hclog.Logger
	StreamingClient StreamingClient // default: gRPC, with StreamingTLS
	// StreamingTLS, when set, is the TLS of the default StreamingClient's
	// connections: coordd presents its server certificate (the node admits
	// Assign and Remove only from it) and verifies the node's
	// (security.StreamingNodeClient). nil: plaintext.
	StreamingTLS *tls.Config
}

func (c Config) withDefaults() Config {
	if c.ClusterID == "" {
		c.ClusterID = "by-dev"
	}
	if c.PChannelPrefix == "" {
		c.PChannelPrefix = "by-dev-rootcoord-dml"
	}
	if c.PChannels == 0 {
		c.PChannels = 16
	}
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.BackoffInitial <= 0 {
		c.BackoffInitial = 10 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Second
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = 10 * time.Second
	}
	if c.MaxParallel <= 0 {
		c.MaxParallel = 64
	}
	if c.Policy == (policy.Config{}) {
		c.Policy = policy.DefaultConfig()
	}
	if c.PolicyName == "" {
		c.PolicyName = "vchannelFair"
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.StreamingClient == nil {
		c.StreamingClient = newGRPCStreamingClient(c.StreamingTLS)
	}
	return c
}

// Balancer is the controller. Create it once; Run is its leader routine.
type Balancer struct {
	leader Leader
	health Health
	cfg    Config
	policy policy.Policy

	trigger  chan struct{}
	requests chan chan Report // manual rebalances waiting for a report

	mu        sync.Mutex
	lastError string
	rounds    uint64
	// quiet counts the rounds that succeeded without a change; after one,
	// Run waits for a trigger, a change or the interval.
	quiet uint64
}

// New validates the configuration and builds a balancer.
func New(leader Leader, health Health, cfg Config) (*Balancer, error) {
	cfg = cfg.withDefaults()
	if err := vocab.ValidatePrefix(cfg.PChannelPrefix); err != nil {
		return nil, fmt.Errorf("pchannel prefix: %w", err)
	}
	if err := vocab.ValidateClusterID(cfg.ClusterID); err != nil {
		return nil, fmt.Errorf("cluster id: %w", err)
	}
	if cfg.PChannels < 1 || cfg.PChannels > fsm.MaxPChannels {
		return nil, fmt.Errorf("pchannel count must be in 1..%d, got %d", fsm.MaxPChannels, cfg.PChannels)
	}
	p, err := policy.New(cfg.PolicyName, cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("balance policy: %w", err)
	}
	return &Balancer{leader: leader, health: health, cfg: cfg, policy: p, trigger: make(chan struct{}, 1), requests: make(chan chan Report)}, nil
}

// Close releases connections to streaming nodes.
func (b *Balancer) Close() { b.cfg.StreamingClient.Close() }

// Trigger asks for a round as soon as possible (manual rebalance).
func (b *Balancer) Trigger() {
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// LastError is the error of the last failed round ("" after a success).
func (b *Balancer) LastError() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastError
}

// Run is the leader routine: bootstrap streaming if needed, then balance
// on every trigger until ctx ends. It proposes through the routine's
// proposer p, as decisions of term.
func (b *Balancer) Run(ctx context.Context, term uint64, p commands.Proposer) {
	decider := commands.Fenced(p, term) // every proposal carries this term
	for ctx.Err() == nil {
		if err := b.ensurePChannels(ctx, decider); err != nil {
			b.cfg.Logger.Warn("initializing pchannels failed; retrying", "error", err)
			sleep(ctx, b.cfg.Clock, time.Second)
			continue
		}
		break
	}
	backoff := time.Duration(0)
	timer := b.cfg.Clock.NewTimer(0)
	defer timer.Stop()
	// lastLayout is the signature of the last round that changed nothing
	// ("" after a change or a failure); laidOut identifies the channel
	// records that round decided on. The signature is a function of those
	// records and of health only, so while both are unchanged a state
	// change cannot change it, and Run skips Decide for it.
	var lastLayout string
	var laidOut fsm.ChannelRecords
	// waiting are manual rebalances to answer once a round changes nothing
	// (or fails); moved is what the rounds since the first of them moved.
	var waiting []chan Report
	var moved []Move
	// pace bounds Decide's share of a core: a round woken by a change
	// (not a timer, a trigger or a request) first rests pacing.Duty times
	// the last Decide's duration. At Milvus-max's 65,536 VChannels a
	// Decide costs tens of milliseconds, and new collections (each one a
	// channel-record change) arrive several times a second.
	var pace pacing.Pacer
	stateCh, healthCh := b.leader.StateChanged(), b.health.Changed()
	for {
		forced, stateOnly := false, false
		select {
		case <-ctx.Done():
			return
		case <-timer.Chan():
			forced = true
		case <-b.trigger:
			forced = true
		case r := <-b.requests:
			waiting = append(waiting, r)
			forced = true
		case <-stateCh:
			stateOnly = true
		case <-healthCh:
		}
		if stateOnly && lastLayout != "" {
			// Most entries (manifest commits, allocations, broadcasts)
			// touch no channel record: skip Decide for them. healthCh is
			// kept, so a health change not yet seen still wakes a round.
			stateCh = b.leader.StateChanged()
			if b.leader.State().ChannelRecords() == laidOut {
				continue
			}
		}
		// Take the notifications before reading the state and health, so
		// a change landing during this round wakes the next select.
		stateCh, healthCh = b.leader.StateChanged(), b.health.Changed()
		if backoff > 0 && !forced {
			continue // a failed round waits for its backoff timer
		}
		balanced := lastLayout
		if forced {
			balanced = ""
		} else if d := pace.Wait(b.cfg.Clock.Now()); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-b.cfg.Clock.After(d):
			}
		}
		st := b.leader.State()
		start := b.cfg.Clock.Now()
		plan, err := b.decide(st, balanced)
		pace.Ran(start, b.cfg.Clock.Now())
		if !forced && plan.Signature == lastLayout {
			laidOut = st.ChannelRecords() // the same layout, from newer records
			continue
		}
		changed := false
		if err == nil {
			var committed map[string]int64
			changed, committed, err = b.executeReport(ctx, decider, plan)
			if len(waiting) > 0 {
				moved = append(moved, movesOf(plan, committed)...)
			}
		}
		if len(waiting) > 0 && (err != nil || !changed) {
			rep := Report{Moves: moved}
			if len(moved) == 0 {
				view := View{State: b.leader.State(), Healthy: b.health.Healthy}
				rep.Reason, rep.NextMove = Explain(view, b.cfg.Clock.Now(), b.policy.Name(), b.cfg.Policy, err)
			}
			for _, w := range waiting {
				w <- rep // buffered, one each
			}
			waiting, moved = nil, nil
		}
		b.mu.Lock()
		b.rounds++
		if err == nil && !changed {
			b.quiet++
		}
		if err != nil {
			b.lastError = err.Error()
		} else {
			b.lastError = ""
		}
		b.mu.Unlock()
		switch {
		case err != nil:
			backoff = min(max(2*backoff, b.cfg.BackoffInitial), b.cfg.BackoffMax)
			b.cfg.Logger.Warn("balance round failed", "error", err, "retry_in", backoff)
			lastLayout = ""
			resetTimer(timer, backoff)
		case changed:
			backoff = 0
			lastLayout = ""
			resetTimer(timer, 0) // balance until no change
		default:
			backoff = 0
			lastLayout, laidOut = plan.Signature, st.ChannelRecords()
			resetTimer(timer, b.cfg.Interval)
		}
	}
}

// ensurePChannels creates the configured PChannels: InitStreaming once,
// then AddPChannels for any configured index that is missing, proposed
// through decider.
func (b *Balancer) ensurePChannels(ctx context.Context, decider commands.Proposer) error {
	st := b.leader.State()
	var names []string
	for i := 0; i < b.cfg.PChannels; i++ {
		n := vocab.PChannelName(b.cfg.PChannelPrefix, i)
		if _, ok := st.PChannel(n); !ok {
			names = append(names, n)
		}
	}
	initialized := st.StreamingInitialized()
	// One command carries at most MaxPChannelsPerCmd names.
	for len(names) > 0 {
		chunk := names[:min(len(names), vocab.MaxPChannelsPerCmd)]
		names = names[len(chunk):]
		var body proto.Message = &logpb.AddPChannels{Pchannels: chunk}
		if !initialized {
			body = &logpb.InitStreaming{ClusterId: b.cfg.ClusterID, Pchannels: chunk}
		}
		if _, err := commands.CommitNew(ctx, decider, body, ""); err != nil {
			return err
		}
		initialized = true
	}
	return nil
}

// decide is Decide on st (unless its signature is balanced) with this
// balancer's health, clock and policy.
func (b *Balancer) decide(st *fsm.State, balanced string) (Plan, error) {
	return Decide(View{State: st, Healthy: b.health.Healthy, Balanced: balanced}, b.cfg.Clock.Now(), b.policy)
}

// execute commits plan's assignments and runs phase two for each channel
// the FSM assigned; changed reports whether any was (another round
// should follow at once). decider proposes.
func (b *Balancer) execute(ctx context.Context, decider commands.Proposer, plan Plan) (changed bool, err error) {
	changed, _, err = b.executeReport(ctx, decider, plan)
	return changed, err
}

// executeReport is execute that also returns the term of every channel
// the FSM assigned.
func (b *Balancer) executeReport(ctx context.Context, decider commands.Proposer, plan Plan) (changed bool, committed map[string]int64, err error) {
	if len(plan.Assignments) == 0 {
		return false, nil, nil
	}
	res, err := commands.CommitNew(ctx, decider, &logpb.AssignPChannels{Assignments: plan.Assignments}, "")
	if err != nil {
		return false, nil, fmt.Errorf("commit assignment: %w", err)
	}
	assigned := res.GetAssign().GetAssigned()
	committed = make(map[string]int64, len(assigned))
	for _, a := range assigned {
		committed[a.Pchannel] = a.Term
	}
	return len(assigned) > 0, committed, b.applyAll(ctx, decider, assigned)
}

// applyAll runs phase two for every assigned channel, at most MaxParallel
// at once, and returns the first failure.
func (b *Balancer) applyAll(ctx context.Context, decider commands.Proposer, assigned []*logpb.PChannelTerm) error {
	sem := make(chan struct{}, b.cfg.MaxParallel)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, a := range assigned {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := b.apply(ctx, decider, a.Pchannel, a.Term); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d channels failed, first: %w", len(errs), len(assigned), errs[0])
	}
	return nil
}

// apply is phase two for one channel at one term.
func (b *Balancer) apply(ctx context.Context, decider commands.Proposer, pchannel string, term int64) error {
	err := b.applyRPCs(ctx, pchannel, term)
	if err == nil {
		if _, perr := commands.CommitNew(ctx, decider, &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: pchannel, Term: term}}}, ""); perr != nil {
			return fmt.Errorf("%s@%d: commit done: %w", pchannel, term, perr)
		}
		return nil
	}
	reason := vocab.TruncateReason(err.Error())
	_, _ = commands.CommitNew(ctx, decider, &logpb.RecordAssignFailure{Channel: &logpb.PChannelTerm{Pchannel: pchannel, Term: term, Reason: reason}}, "")
	return fmt.Errorf("%s@%d: %w", pchannel, term, err)
}

// applyRPCs removes the channel from every history node, then opens it on
// the target, all fenced by this leader's raft term.
func (b *Balancer) applyRPCs(ctx context.Context, pchannel string, term int64) error {
	st := b.leader.State()
	p, ok := st.PChannel(pchannel)
	if !ok {
		return fmt.Errorf("pchannel vanished")
	}
	if p.Term != term || p.State != logpb.PChannelState_PCHANNEL_ASSIGNING {
		return fmt.Errorf("channel moved on to %s at term %d", p.State, p.Term)
	}
	coordTerm := b.leader.EstablishedTerm()
	if coordTerm == 0 {
		return fmt.Errorf("no longer the leader")
	}
	for _, h := range p.Histories {
		n, ok := st.StreamingNode(h.NodeId)
		if !ok {
			continue // evicted long ago: its WAL is fenced by the new term anyway
		}
		timeout := b.cfg.RPCTimeout
		if n.State == logpb.NodeState_NODE_DOWN {
			// Best effort: a down node is often gone or paused, and the
			// fence protects the WAL without it; do not stall the move.
			timeout = min(timeout, downNodeRemoveTimeout)
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		err := b.cfg.StreamingClient.Remove(rctx, targetOf(n), pchannel, h.Term, coordTerm)
		cancel()
		if err != nil && n.State != logpb.NodeState_NODE_DOWN {
			return fmt.Errorf("remove from node %d (%s) at term %d: %w", n.Id, n.Address, h.Term, err)
		}
		// A DOWN node may be gone; the WAL fence (the new term is recorded
		// before the target accepts appends) keeps it from writing.
	}
	target, ok := st.StreamingNode(p.NodeId)
	if !ok {
		return fmt.Errorf("target node %d unknown", p.NodeId)
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RPCTimeout)
	defer cancel()
	if err := b.cfg.StreamingClient.Assign(rctx, targetOf(target), pchannel, term, p.Mode, coordTerm); err != nil {
		return fmt.Errorf("assign on node %d (%s): %w", target.Id, target.Address, err)
	}
	return nil
}

func resetTimer(t clockwork.Timer, d time.Duration) {
	if !t.Stop() {
		select {
		case <-t.Chan():
		default:
		}
	}
	t.Reset(d)
}

func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.Chan():
	}
}
