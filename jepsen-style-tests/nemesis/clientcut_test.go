package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/proxy"
)

// fakeCluster has real client-link proxies (in front of one idle listener)
// and no processes; member 0 is the leader.
type fakeCluster struct {
	t0      time.Time
	clients []*proxy.Proxy
}

func (f *fakeCluster) N() int                       { return len(f.clients) }
func (f *fakeCluster) ID(i int) string              { return fmt.Sprintf("n%d", i+1) }
func (f *fakeCluster) Spec(i int) client.MemberSpec { return client.MemberSpec{ID: f.ID(i)} }
func (f *fakeCluster) Link(from, to int) *proxy.Proxy {
	panic("no raft links in the fake cluster")
}
func (f *fakeCluster) ClientLink(i int) *proxy.Proxy { return f.clients[i] }
func (f *fakeCluster) HealNetwork() {
	for _, p := range f.clients {
		p.Pass()
	}
}
func (f *fakeCluster) Leader(context.Context) (int, error) { return 0, nil }
func (f *fakeCluster) Kill(int) error                      { return nil }
func (f *fakeCluster) Start(int) error                     { return errors.New("running") }
func (f *fakeCluster) Pause(int) error                     { return nil }
func (f *fakeCluster) Resume(int) error                    { return errors.New("not paused") }
func (f *fakeCluster) WaitReady(context.Context, int, time.Duration) error {
	return nil
}
func (f *fakeCluster) Endpoints(int) []string { return nil }
func (f *fakeCluster) Damage(int, string) (DamageResult, error) {
	return DamageResult{}, errors.New("no data dirs")
}
func (f *fakeCluster) LogStore(int) string { return "wal" }
func (f *fakeCluster) TryStart(int, time.Duration) (bool, string, error) {
	return false, "", errors.New("running")
}
func (f *fakeCluster) StartJoining(int) error { return errors.New("running") }
func (f *fakeCluster) Now() int64             { return int64(time.Since(f.t0)) }
func (f *fakeCluster) Logf(string, ...any)    {}
func (f *fakeCluster) modes() (cut []int) {
	for i, p := range f.clients {
		if p.Mode() != proxy.Pass {
			cut = append(cut, i)
		}
	}
	return cut
}

// TestClientCutInjectedAndHealed runs a schedule of client-cut faults
// against real proxies: each fault cuts the leader's client link or a
// minority's, never a majority's, is recorded in the timeline, and every
// client link passes again after its hold and after Run.
func TestClientCutInjectedAndHealed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, nodes := range []int{3, 5} {
		f := &fakeCluster{t0: time.Now()}
		for i := 0; i < nodes; i++ {
			p, err := proxy.New(fmt.Sprintf("clients->n%d", i+1), "127.0.0.1:0", ln.Addr().String(), uint64(i))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			f.clients = append(f.clients, p)
		}
		n := New(f, Config{Seed: 11, Kinds: ClientKinds, First: ClientKinds, Duration: 600 * time.Millisecond,
			QuietMin: 20 * time.Millisecond, QuietMax: 40 * time.Millisecond,
			HoldMin: 60 * time.Millisecond, HoldMax: 80 * time.Millisecond}, nil)
		var mu sync.Mutex
		sawCut := map[string]bool{}
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-time.After(5 * time.Millisecond):
				case <-stop:
					return
				}
				if cut := f.modes(); len(cut) > 0 {
					if len(cut) > (nodes-1)/2 {
						t.Errorf("%d nodes: %d client links cut at once (a majority)", nodes, len(cut))
					}
					mu.Lock()
					sawCut[fmt.Sprint(cut)] = true
					mu.Unlock()
				}
			}
		}()
		if err := n.Run(context.Background()); err != nil {
			t.Fatalf("heal: %v", err)
		}
		close(stop)
		<-done
		if cut := f.modes(); len(cut) > 0 {
			t.Fatalf("%d nodes: client links %v still cut after Run", nodes, cut)
		}
		tl := n.Timeline()
		if len(tl) < 2 {
			t.Fatalf("%d nodes: %d faults in the timeline", nodes, len(tl))
		}
		for _, w := range tl {
			if w.Kind != ClientCut || w.Targets == "" || w.Error != "" || w.End <= w.Start {
				t.Fatalf("%d nodes: bad window %+v", nodes, w)
			}
		}
		if len(sawCut) == 0 {
			t.Fatalf("%d nodes: never saw a client link cut", nodes)
		}
		t.Logf("%d nodes: %d windows, cut sets seen %v, e.g. %+v", nodes, len(tl), sawCut, tl[0])
	}
}
