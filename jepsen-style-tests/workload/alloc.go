package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// Alloc is the allocator workload: concurrent clients, each preferring a
// different member, calling AllocTimestamp and AllocID with small random
// counts.
type Alloc struct {
	// NClients is the number of concurrent clients (default 2 per member).
	NClients int
	// Think is the maximum pause between one client's operations (default
	// 10ms); the pause is uniform in [0, Think).
	Think time.Duration
	// LinTimeout bounds porcupine (default 2 minutes).
	LinTimeout time.Duration
	// MaxOps bounds each client's operations (default 200000).
	MaxOps int
	// InjectStale, for testing the tests only: every InjectStale-th ok
	// timestamp allocation of the first client records the value of that
	// client's first allocation instead of the real one, as a deposed
	// leader serving from an old window would. 0 disables it.
	InjectStale int
}

func (a *Alloc) Name() string { return "alloc" }

func (a *Alloc) Clients() int {
	if a.NClients <= 0 {
		return 6
	}
	return a.NClients
}

// Run starts the clients and waits for them to stop when ctx ends.
func (a *Alloc) Run(ctx context.Context, env Env) error {
	n := a.Clients()
	think := a.Think
	if think <= 0 {
		think = 10 * time.Millisecond
	}
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		cl, err := client.New(ctx, env.ClientConfig(RoleProxy, env.Endpoints(k%env.Members)))
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			rng := rand.New(rand.NewPCG(env.Seed, uint64(env.ClientBase+k)))
			id := env.ClientBase + k
			var stale staleInjector
			if k == 0 {
				stale.every = a.InjectStale
			}
			maxOps := a.MaxOps
			if maxOps <= 0 {
				maxOps = 200000
			}
			for op := 0; op < maxOps && ctx.Err() == nil; op++ {
				a.one(ctx, cl, rng, id, env.Recorder, &stale)
				if think > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(time.Duration(rng.Int64N(int64(think)))):
					}
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// one performs and records one allocation.
func (a *Alloc) one(ctx context.Context, cl *client.Client, rng *rand.Rand, id int, rec *history.Recorder, stale *staleInjector) {
	f := checker.FAllocTS
	if rng.IntN(2) == 0 {
		f = checker.FAllocID
	}
	count := uint32(1)
	switch r := rng.IntN(10); {
	case r < 6:
	case r < 9:
		count = uint32(2 + rng.IntN(9))
	default:
		count = uint32(100 + rng.IntN(900))
	}
	p := rec.Invoke(id, f, checker.AllocInput{Count: count})
	var first uint64
	var got uint32
	var err error
	if f == checker.FAllocTS {
		first, got, err = cl.AllocTimestamp(ctx, count)
	} else {
		first, got, err = cl.AllocID(ctx, count)
	}
	switch Classify(err) {
	case history.Ok:
		if f == checker.FAllocTS {
			first = stale.apply(first)
		}
		p.Ok(checker.AllocOutput{First: first, Count: got})
	case history.Fail:
		p.Fail(err)
	default:
		if ctx.Err() != nil {
			err = fmt.Errorf("cut off by the end of the run: %w", err)
		}
		p.Info(err)
	}
}

// Check runs porcupine, the real-time order checker and the uniqueness
// checker.
func (a *Alloc) Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result {
	timeout := a.LinTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	html := ""
	if dir != "" {
		html = filepath.Join(dir, "alloc-linearizability.html")
	}
	return []checker.Result{
		checker.AllocLinearizable(ops, timeout, html, notes),
		checker.AllocRealTime(ops),
		checker.AllocUnique(ops),
	}
}

// staleInjector replaces every n-th timestamp with the first one seen.
type staleInjector struct {
	every int
	n     int
	first uint64
}

func (s *staleInjector) apply(v uint64) uint64 {
	if s.every <= 0 {
		return v
	}
	s.n++
	if s.n == 1 {
		s.first = v
		return v
	}
	if s.n%s.every == 0 {
		return s.first
	}
	return v
}
