package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// Operator is what operators do to a cluster while it broadcasts: three
// clients race replication-configuration updates that are incompatible
// with each other (this cluster alone, or with one of two disaster-recovery
// clusters whose PChannel lists conflict), and a fourth abandons pending
// broadcasts. After the load, a final probe broadcasts FlushAll under the
// exclusive Cluster key: it must complete, so nothing is left holding the
// key for ever.
type Operator struct {
	// abandoned counts successful abandons. They are not history
	// operations: whether any task is pending to abandon after the heal is
	// luck, and every history operation kind must succeed after it.
	abandoned atomic.Int64
}

func (o *Operator) Name() string { return "operator" }

func (o *Operator) Clients() int { return 4 }

// OperatorIn is the history input of a replicate update.
type OperatorIn struct {
	Config string `json:"config,omitempty"` // "alone", "dr-a" or "dr-b"
}

// configs builds the three configurations over this cluster's PChannels.
func operatorConfigs(cluster string, pchannels []string) map[string]*coordpb.ReplicateConfiguration {
	own := &coordpb.ReplicateCluster{ClusterId: cluster, Pchannels: pchannels}
	dr := func(prefix string) *coordpb.ReplicateConfiguration {
		c := &coordpb.ReplicateCluster{ClusterId: prefix}
		for i := range pchannels {
			c.Pchannels = append(c.Pchannels, fmt.Sprintf("%s-dml_%d", prefix, i))
		}
		return &coordpb.ReplicateConfiguration{Clusters: []*coordpb.ReplicateCluster{own, c},
			Topology: []*coordpb.ReplicateTopology{{SourceClusterId: cluster, TargetClusterId: prefix}}}
	}
	a, b := dr("dra"), dr("drb")
	b.Clusters[1].ClusterId, b.Topology[0].TargetClusterId = "dra", "dra" // same cluster, another PChannel list
	return map[string]*coordpb.ReplicateConfiguration{
		"alone": {Clusters: []*coordpb.ReplicateCluster{own}}, "dr-a": a, "dr-b": b,
	}
}

func (o *Operator) Run(ctx context.Context, env Env) error {
	admin, err := client.New(ctx, env.ClientConfig(RoleAdmin, env.Endpoints(0)))
	if err != nil {
		return err
	}
	defer admin.Close()
	var cluster string
	var names []string
	for ctx.Err() == nil && (cluster == "" || len(names) == 0) {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		if rc, err := admin.GetReplicateConfiguration(lctx); err == nil {
			cluster = rc.ClusterId
		}
		if resp, err := admin.ListPChannels(lctx, coordpb.ReadConsistency_LINEARIZABLE); err == nil {
			names = names[:0]
			for _, p := range resp.Pchannels {
				names = append(names, p.Name)
			}
		}
		cancel()
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(names)
	cfgs := operatorConfigs(cluster, names)
	kinds := []string{"alone", "dr-a", "dr-b"}
	var wg sync.WaitGroup
	for k := 0; k < 4; k++ {
		cfg := env.ClientConfig(RoleAdmin, env.Endpoints(k%env.Members))
		cfg.RequestTimeout, cfg.AttemptTimeout = 8*time.Second, 3*time.Second
		cl, err := client.New(ctx, cfg)
		if err != nil {
			return err
		}
		id := env.ClientBase + k
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			rng := rand.New(rand.NewPCG(env.Seed, uint64(id)))
			for ctx.Err() == nil {
				if k < 3 {
					in := OperatorIn{Config: kinds[rng.IntN(len(kinds))]}
					p := env.Recorder.Invoke(id, "replicate", in)
					record(p, cl.UpdateReplicateConfiguration(ctx, cfgs[in.Config]), nil)
				} else {
					o.abandonOne(ctx, cl, rng)
				}
				pause := time.Duration(rng.IntN(50)) * time.Millisecond // updates race each other
				if k == 3 {
					pause = time.Duration(100+rng.IntN(300)) * time.Millisecond
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
	wg.Wait()
	// The load is over and the cluster healed: a FlushAll under the
	// exclusive Cluster key must get through.
	pctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	p := env.Recorder.Invoke(env.ClientBase, "final-flush-all", OperatorIn{})
	_, err = admin.Broadcast(pctx, client.BroadcastSpec{MessageType: "FlushAll",
		ResourceKeys: []*coordpb.ResourceKey{{Domain: "CLUSTER"}}})
	record(p, err, struct{}{})
	return nil
}

// abandonOne abandons a random pending broadcast, if there is one.
func (o *Operator) abandonOne(ctx context.Context, cl *client.Client, rng *rand.Rand) {
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	pending, err := cl.ListBroadcasts(lctx, true, 100)
	cancel()
	// Configuration updates are left alone: abandoning a stuck one would
	// hide the wedge the final probe looks for.
	var candidates []uint64
	for _, b := range pending {
		if err == nil && b.MessageType != "AlterReplicateConfig" {
			candidates = append(candidates, b.BroadcastId)
		}
	}
	if len(candidates) == 0 {
		return
	}
	victim := candidates[rng.IntN(len(candidates))]
	if cl.AbandonBroadcast(ctx, victim, "jepsen operator") == nil {
		o.abandoned.Add(1)
	}
}

func record(p *history.Pending, err error, out any) {
	switch Classify(err) {
	case history.Ok:
		p.Ok(out)
	case history.Fail:
		p.Fail(err)
	default:
		p.Info(err)
	}
}

// Check: operator-liveness (the final FlushAll under the exclusive Cluster
// key completed: no refused configuration or abandoned task left the key
// held) and that the racing updates exercised both outcomes.
func (o *Operator) Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result {
	live := newResult("operator-liveness")
	var n [3]int // ok, fail, info of replicate updates
	abandons, final := o.abandoned.Load(), 0
	for _, op := range ops {
		switch op.F {
		case "replicate":
			switch op.Type {
			case history.Ok:
				n[0]++
			case history.Fail:
				n[1]++
			default:
				n[2]++
			}
		case "final-flush-all":
			final++
			if op.Type != history.Ok {
				live.add("the final FlushAll under the exclusive Cluster key did not complete: %s", op.Error)
			}
		}
	}
	if final != 1 {
		live.add("%d final FlushAll probes recorded, want 1", final)
	}
	if n[0] == 0 || n[1] == 0 {
		live.add("replicate updates: %d ok, %d refused; the run did not race incompatible updates", n[0], n[1])
	}
	live.r.Summary = fmt.Sprintf("replicate updates ok %d, refused %d, info %d; %d broadcasts abandoned; final FlushAll probes %d",
		n[0], n[1], n[2], abandons, final)
	return []checker.Result{live.r}
}
