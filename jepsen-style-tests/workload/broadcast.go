package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/streamingnode/wal"
)

// Broadcast is the broadcast workload: concurrent clients broadcast a
// AlterAlias message (a type without a callback) to two of a few VChannels (one per PChannel), each
// taking one of two exclusive resource keys, half of them with an
// idempotency key (and some of those repeated with the same key); the
// other half carry none, so only the request ID the SDK gives every call
// keeps its resends after an unknown outcome from making a second task
// (docs/semantics.md#client-retries). Every logical call has a payload of its own (client ID and
// sequence number), so a WAL record names the call it came from. When the
// load stops, a last client lists every task coordd keeps (broadcast-tasks)
// for the duplicate checker (broadcast_dups.go).
type Broadcast struct {
	NClients  int // default 3
	PChannels int // default 3
	// AckSyncUp makes every other broadcast ack_sync_up (the streaming
	// nodes ack it themselves), so there are pending acks a hostile
	// client can forge.
	AckSyncUp bool
	// Collection, when non-zero, makes the targets real VChannels of this
	// collection (allocated first, one shard per PChannel), so a writer's
	// Insert can name a broadcast's VChannel and its dedup ID can meet a
	// broadcast ID there (the claim writer, nemesis/claim.go). Zero: the
	// targets are <pchannel>_200v0, which no collection owns.
	Collection int64
	// ClaimPrefix starts the history f of the claim writer's records, if
	// the scenario has one: broadcast-at-most-once counts its claims.
	ClaimPrefix string
	walDir      string
}

// BroadcastIn and BroadcastOut are the history input and output.
type BroadcastIn struct {
	Payload   string   `json:"payload"`
	VChannels []string `json:"vchannels"`
	Key       string   `json:"key"`            // the exclusive resource key
	Idem      string   `json:"idem,omitempty"` // idempotency key (COLLECTION scope)
	IdemScope int64    `json:"idem_scope,omitempty"`
}

type BroadcastOut struct {
	ID         uint64 `json:"id"`
	Duplicated bool   `json:"duplicated,omitempty"`
}

func (b *Broadcast) Name() string { return "broadcast" }

// Clients: the broadcasting clients and the final task listing.
func (b *Broadcast) Clients() int { return b.clients() + 1 }

func (b *Broadcast) clients() int {
	if b.NClients <= 0 {
		return 3
	}
	return b.NClients
}

func (b *Broadcast) Run(ctx context.Context, env Env) error {
	b.walDir = env.WALDir
	targets, err := b.targets(ctx, env)
	if err != nil || ctx.Err() != nil {
		return err
	}
	if err := b.broadcast(ctx, env, targets); err != nil {
		return err
	}
	// The load has stopped (the cluster is healed): list every task.
	listTasks(env, env.ClientBase+b.clients())
	return nil
}

// targets are the VChannels the clients broadcast to: <pchannel>_200v0 on
// the first PChannels, or the VChannels of b.Collection.
func (b *Broadcast) targets(ctx context.Context, env Env) ([]string, error) {
	names, err := firstPChannels(ctx, env, b.Name(), b.PChannels)
	if err != nil || b.Collection == 0 {
		for i := range names {
			names[i] += "_200v0"
		}
		return names, err
	}
	cl, err := client.New(ctx, env.ClientConfig(RoleProxy, env.Endpoints(0)))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for { // one request ID: a retry after an unknown outcome returns the same VChannels
		vchs, err := cl.AllocVirtualChannels(ctx, b.Collection, uint32(len(names)), fmt.Sprintf("broadcast-workload-%d", b.Collection))
		if err == nil {
			return vchs, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// broadcast runs the clients until ctx ends.
func (b *Broadcast) broadcast(ctx context.Context, env Env, names []string) error {
	var wg sync.WaitGroup
	for k := 0; k < b.clients(); k++ {
		cfg := env.ClientConfig(RoleProxy, env.Endpoints(k%env.Members))
		cfg.RequestTimeout, cfg.AttemptTimeout = 8*time.Second, 3*time.Second
		cl, err := client.New(ctx, cfg)
		if err != nil {
			wg.Wait()
			return fmt.Errorf("broadcast client %d: %w", k, err)
		}
		id := env.ClientBase + k
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			rng := rand.New(rand.NewPCG(env.Seed, uint64(id)))
			for n := 0; ctx.Err() == nil; n++ {
				perm := rng.Perm(len(names))
				in := BroadcastIn{Payload: fmt.Sprintf("b%d-%d", id, n), Key: fmt.Sprintf("jepsen-k%d", rng.IntN(2))}
				for _, i := range perm[:min(2, len(perm))] {
					in.VChannels = append(in.VChannels, names[i])
				}
				if rng.IntN(2) == 0 {
					in.Idem, in.IdemScope = in.Payload, int64(500+id)
				}
				repeat := in.Idem != "" && rng.IntN(4) == 0
				b.one(ctx, cl, env.Recorder, id, in)
				if repeat && ctx.Err() == nil {
					b.one(ctx, cl, env.Recorder, id, in) // same idempotency key: must return the same task
				}
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(rng.Int64N(int64(20 * time.Millisecond)))):
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

func (b *Broadcast) one(ctx context.Context, cl *client.Client, rec *history.Recorder, id int, in BroadcastIn) {
	spec := client.BroadcastSpec{
		MessageType:  "AlterAlias",
		Payload:      []byte(in.Payload),
		ResourceKeys: []*coordpb.ResourceKey{{Domain: client.DomainCollectionName, Key: in.Key}},
		VChannels:    in.VChannels,
		AckSyncUp:    b.AckSyncUp && len(in.Payload)%2 == 0,
	}
	if in.Idem != "" {
		spec.Idempotency = &client.IdempotencyKey{Scope: client.ScopeCollection, ScopeID: in.IdemScope, Key: in.Idem}
	}
	p := rec.Invoke(id, "broadcast", in)
	resp, err := cl.Broadcast(ctx, spec)
	switch Classify(err) {
	case history.Ok:
		p.Ok(BroadcastOut{ID: resp.BroadcastId, Duplicated: resp.Duplicated})
	case history.Fail:
		p.Fail(err)
	default:
		p.Info(err)
	}
}

type bcOp struct {
	op  history.Op
	in  BroadcastIn
	out BroadcastOut
}

// Check: broadcast-exactly-once (every acknowledged broadcast is in every
// target VChannel's WAL exactly once; no broadcast ID twice in a
// VChannel), broadcast-conflict-order (broadcasts holding the same
// exclusive key are in the same relative order in every VChannel they
// share, and in ascending broadcast ID order) and broadcast-idempotency (one idempotency key, one broadcast ID).
func (b *Broadcast) Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result {
	var bops []bcOp
	pchannels := map[string]bool{}
	var counts [3]int
	for _, o := range ops {
		if o.F != "broadcast" {
			continue
		}
		a := bcOp{op: o}
		_ = json.Unmarshal(o.Input, &a.in)
		switch o.Type {
		case history.Ok:
			_ = json.Unmarshal(o.Output, &a.out)
			counts[0]++
		case history.Fail:
			counts[1]++
		default:
			counts[2]++
		}
		for _, v := range a.in.VChannels {
			pchannels[wal.PChannelOf(v)] = true
		}
		bops = append(bops, a)
	}
	once := newResult("broadcast-exactly-once")
	order := newResult("broadcast-conflict-order")
	idem := newResult("broadcast-idempotency")

	type bv struct {
		id uint64
		v  string
	}
	seen := map[bv]int{}
	seq := map[string][]uint64{} // vchannel -> broadcast IDs in WAL order
	nrec := 0
	var names []string
	for p := range pchannels {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		recs, err := wal.ReadAll(b.walDir, p, "", 0)
		if err != nil {
			once.add("read WAL of %s: %v", p, err)
		}
		for _, r := range recs {
			if r.BroadcastID == 0 {
				continue
			}
			nrec++
			k := bv{r.BroadcastID, r.VChannel}
			seen[k]++
			if seen[k] == 2 {
				once.add("broadcast %d is in the WAL of %s more than once", r.BroadcastID, r.VChannel)
			}
			if seen[k] == 1 {
				seq[r.VChannel] = append(seq[r.VChannel], r.BroadcastID)
			}
		}
	}
	keyOf := map[uint64]string{}
	byIdem := map[string]uint64{}
	for _, a := range bops {
		if a.op.Type != history.Ok {
			continue
		}
		keyOf[a.out.ID] = a.in.Key
		for _, v := range a.in.VChannels {
			if n := seen[bv{a.out.ID, v}]; n == 0 {
				once.add("acknowledged broadcast %d (%s, payload %s) is not in the WAL of %s", a.out.ID, a.in.VChannels, a.in.Payload, v)
			}
		}
		if a.in.Idem != "" {
			k := fmt.Sprintf("%d/%s", a.in.IdemScope, a.in.Idem)
			if prev, ok := byIdem[k]; ok && prev != a.out.ID {
				idem.add("idempotency key %s returned broadcast %d and %d", k, prev, a.out.ID)
			}
			byIdem[k] = a.out.ID
		}
	}
	// Relative order of same-key broadcasts: for every key and every two
	// VChannels, the broadcasts in both must be in the same order.
	byKey := map[string]map[string][]uint64{} // key -> vchannel -> IDs in WAL order
	for v, ids := range seq {
		for _, id := range ids {
			if k, ok := keyOf[id]; ok {
				if byKey[k] == nil {
					byKey[k] = map[string][]uint64{}
				}
				byKey[k][v] = append(byKey[k][v], id)
			}
		}
	}
	// Conflicting tasks are created one after the other (the later one
	// waits for the earlier one's keys), so their IDs give their order:
	// in every VChannel they must appear in ascending ID order.
	for k, vs := range byKey {
		for v, ids := range vs {
			for i := 1; i < len(ids); i++ {
				if ids[i] < ids[i-1] {
					order.add("key %s: broadcast %d is after broadcast %d in %s", k, ids[i], ids[i-1], v)
				}
			}
		}
	}
	pairs := 0
	for k, vs := range byKey {
		var vnames []string
		for v := range vs {
			vnames = append(vnames, v)
		}
		sort.Strings(vnames)
		for i := 0; i < len(vnames); i++ {
			for j := i + 1; j < len(vnames); j++ {
				pairs++
				if a, b, ok := sameOrder(vs[vnames[i]], vs[vnames[j]]); !ok {
					order.add("key %s: broadcasts %d and %d are in opposite orders in %s and %s", k, a, b, vnames[i], vnames[j])
				}
			}
		}
	}
	once.r.Summary = fmt.Sprintf("%d broadcasts (ok %d, fail %d, info %d), %d broadcast records in %d pchannels", len(bops), counts[0], counts[1], counts[2], nrec, len(names))
	order.r.Summary = fmt.Sprintf("%d (key, vchannel pair) sequences compared", pairs)
	idem.r.Summary = fmt.Sprintf("%d idempotency keys acknowledged", len(byIdem))
	return []checker.Result{once.r, order.r, idem.r, b.checkAtMostOnce(ops)}
}

// sameOrder reports whether the IDs x and y have in common appear in the
// same order in both; if not, it returns two IDs in opposite orders.
func sameOrder(x, y []uint64) (uint64, uint64, bool) {
	inY := map[uint64]bool{}
	for _, id := range y {
		inY[id] = true
	}
	inX := map[uint64]bool{}
	var cx, cy []uint64
	for _, id := range x {
		inX[id] = true
		if inY[id] {
			cx = append(cx, id)
		}
	}
	for _, id := range y {
		if inX[id] {
			cy = append(cy, id)
		}
	}
	for i := range cx {
		if cx[i] != cy[i] {
			return cx[i], cy[i], false
		}
	}
	return 0, 0, true
}
