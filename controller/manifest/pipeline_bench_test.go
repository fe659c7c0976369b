package manifest

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/objectstore"
	"github.com/coordd/coordd/vocab"
)

// roundLeader is a fake leader whose log commits in rounds of a fixed
// period: each round applies, in order, everything queued when it starts,
// as raftnode's batcher packs the waiting proposals into one entry. hook
// says whether Propose calls the commands.OnQueued function (false: the
// committer holds the lock until the command commits, as before
// pipelining).
type roundLeader struct {
	*controllertest.Leader
	round time.Duration
	hook  bool
	mu    sync.Mutex
	q     []*pipeItem
}

func (r *roundLeader) Propose(ctx context.Context, c commands.Command, opts ...commands.Option) (*logpb.Result, error) {
	pr := commands.Prepare(c, opts...)
	it := &pipeItem{c: pr.Command, done: make(chan pipeResult, 1)}
	r.mu.Lock()
	r.q = append(r.q, it)
	r.mu.Unlock()
	if r.hook {
		pr.Queued()
	}
	res := <-it.done
	return res.res, res.err
}

func (r *roundLeader) run(stop chan struct{}) {
	t := time.NewTicker(r.round)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		batch := r.q
		r.q = nil
		r.mu.Unlock()
		for _, it := range batch {
			res, err := r.Leader.Propose(context.Background(), it.c)
			it.done <- pipeResult{res, err}
		}
	}
}

// BenchmarkHotSegment: 64 goroutines commit to one segment against a log
// with a fixed 5 ms round. It reports commits/s with pipelining and with
// the lock held until commit.
func BenchmarkHotSegment(b *testing.B) {
	for _, mode := range []struct {
		name string
		hook bool
	}{{"pipelined", true}, {"lock-until-commit", false}} {
		b.Run(mode.name, func(b *testing.B) {
			l := controllertest.NewLeader(b, controllertestClock(), 1)
			l.MustPropose(b, &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{vocab.PChannelName("dml", 0)}})
			l.MustPropose(b, &logpb.AllocVirtualChannels{CollectionId: testColl, Count: 1})
			l.MustPropose(b, &logpb.ReserveIDs{Count: 999})
			st, err := objectstore.Open(context.Background(), b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			rl := &roundLeader{Leader: l, round: 5 * time.Millisecond, hook: mode.hook}
			stop := make(chan struct{})
			defer close(stop)
			go rl.run(stop)
			c := New(rl, Config{Store: st})
			ctx := context.Background()
			if _, err := commitProto(ctx, c, createReq(5)); err != nil {
				b.Fatal(err)
			}
			var n atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 goroutines
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					req := statsReq(5, fmt.Sprintf("k%d", i%64), fmt.Sprintf("f%d", i))
					if _, err := commitProto(ctx, c, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(n.Load())/time.Since(start).Seconds(), "commits/s")
		})
	}
}

func controllertestClock() clockwork.Clock { return clockwork.NewRealClock() }
