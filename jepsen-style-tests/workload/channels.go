package workload

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// Channels is the channel workload: clients follow the assignment stream
// (client.Watcher) and append to VChannels of a few PChannels on the
// owner the view names, at the owner's term. A rejection that proves the
// view is stale ("not the owner", "fenced", "wrong term") waits for a newer
// view and retries the same payload (the append certainly did not happen);
// any other error ends the operation as info. Every payload is unique
// ("c<client>-<n>"), so the WAL can be matched against the history.
//
// With Zombies, one more client plays a deposed owner's client: whenever a
// PChannel moves to another node, it appends once to the previous owner at
// the previous term. The WAL fence must refuse every such append; a
// record it lets through lands at an older term after newer ones
// (wal-terms-monotonic).
type Channels struct {
	NClients  int // default 4
	PChannels int // how many PChannels to write (default 3)
	Think     time.Duration
	Zombies   bool

	walDir string
	dial   func(addr string) (*grpc.ClientConn, error) // set by Run: a streaming node's port, with the run's credentials
	mu     sync.Mutex
	obs    []Observation
	sent   map[string][]attempt // payload -> every (node, term) it was sent to
}

// Observation is one (term, node) a watcher saw for an ASSIGNED PChannel.
type Observation struct {
	Watcher  int
	PChannel string
	Term     int64
	Node     uint64
	Version  client.Version
	At       int64
}

// AppendIn and AppendOut are the history input and output of an append.
type AppendIn struct {
	VChannel string `json:"vchannel"`
	Payload  string `json:"payload"`
}

type AppendOut struct {
	Node     uint64 `json:"node"`
	Addr     string `json:"addr"`
	Term     int64  `json:"term"`
	Offset   uint64 `json:"offset"`
	Attempts int    `json:"attempts"`
}

// attempt notes, per payload, every (node, term) the payload was sent to
// (a rejected or unknown attempt may still have been written by that node).
type attempt struct {
	Node uint64
	Term int64
}

func (c *Channels) Name() string { return "channels" }

func (c *Channels) Clients() int {
	if c.Zombies {
		return c.appenders() + 1
	}
	return c.appenders()
}

// appenders is the number of ordinary clients.
func (c *Channels) appenders() int {
	if c.NClients <= 0 {
		return 4
	}
	return c.NClients
}

// WALDir is set by Run (from env) and read by Check.
func (c *Channels) Run(ctx context.Context, env Env) error {
	c.walDir = env.WALDir
	c.dial = env.DialStreamingNode
	names, err := firstPChannels(ctx, env, c.Name(), c.PChannels)
	if err != nil {
		return err
	}
	think := c.Think
	if think <= 0 {
		think = 5 * time.Millisecond
	}
	var wg sync.WaitGroup
	if c.Zombies {
		cl, err := client.New(ctx, env.ClientConfig(RoleProxy, env.Endpoints(0)))
		if err != nil {
			return err
		}
		w := cl.NewWatcher()
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = w.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			defer cl.Close()
			c.zombie(ctx, env.ClientBase+c.appenders(), w, env.Recorder, names)
		}()
	}
	for k := 0; k < c.appenders(); k++ {
		cl, err := client.New(ctx, env.ClientConfig(RoleProxy, env.Endpoints(k%env.Members)))
		if err != nil {
			return err
		}
		id := env.ClientBase + k
		w := cl.NewWatcher()
		wg.Add(2)
		go func() {
			defer wg.Done()
			_ = w.Run(ctx)
		}()
		go func() {
			defer wg.Done()
			defer cl.Close()
			conns := map[string]*grpc.ClientConn{}
			defer func() {
				for _, cc := range conns {
					cc.Close()
				}
			}()
			obsDone := make(chan struct{})
			go func() { defer close(obsDone); c.observe(ctx, id, w, env.Recorder) }()
			rng := rand.New(rand.NewPCG(env.Seed, uint64(id)))
			for n := 0; ctx.Err() == nil; n++ {
				pch := names[rng.IntN(len(names))]
				vch := fmt.Sprintf("%s_%dv0", pch, 100+rng.IntN(3))
				c.append(ctx, w, conns, env.Recorder, id, vch, pch, fmt.Sprintf("c%d-%d", id, n))
				select {
				case <-ctx.Done():
				case <-time.After(time.Duration(rng.Int64N(int64(think)))):
				}
			}
			<-obsDone
		}()
	}
	wg.Wait()
	return nil
}

// observe records every (term, node) change of every ASSIGNED PChannel
// in w's views.
func (c *Channels) observe(ctx context.Context, id int, w *client.Watcher, rec *history.Recorder) {
	last := map[string]attempt{}
	var v client.Version
	for {
		view, err := w.WaitNewer(ctx, v)
		if err != nil {
			return
		}
		v = view.Version
		now := rec.Now()
		c.mu.Lock()
		for name, ch := range view.Channels {
			if ch.State != "ASSIGNED" {
				continue
			}
			a := attempt{ch.NodeId, ch.Term}
			if last[name] != a {
				last[name] = a
				c.obs = append(c.obs, Observation{Watcher: id, PChannel: name, Term: ch.Term, Node: ch.NodeId, Version: v, At: now})
			}
		}
		c.mu.Unlock()
	}
}

// staleView is a rejection proving the client's view is out of date.
func staleView(err error) bool {
	if status.Code(err) != codes.FailedPrecondition {
		return false
	}
	m := status.Convert(err).Message()
	return strings.Contains(m, "not the owner") || strings.Contains(m, "fenced") || strings.Contains(m, "wrong term") ||
		strings.Contains(m, "wrong node")
}

func (c *Channels) append(ctx context.Context, w *client.Watcher, conns map[string]*grpc.ClientConn, rec *history.Recorder,
	id int, vch, pch, payload string) {
	p := rec.Invoke(id, "append", AppendIn{VChannel: vch, Payload: payload})
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var lastErr error
	for attempts := 1; ; attempts++ {
		view := w.View()
		for view == nil {
			var err error
			if view, err = w.WaitNewer(octx, client.Version{}); err != nil {
				p.Fail(fmt.Errorf("no assignment view: %w", err)) // nothing was sent
				return
			}
		}
		node, term, ok := view.Owner(pch)
		if !ok {
			if _, err := w.WaitNewer(octx, view.Version); err != nil {
				if attempts == 1 || lastErr == nil {
					p.Fail(fmt.Errorf("%s has no owner: %w", pch, err))
				} else {
					p.Fail(fmt.Errorf("%s has no owner after %v: %w", pch, lastErr, err)) // every attempt was definitely rejected
				}
				return
			}
			continue
		}
		cc := conns[node.Address]
		if cc == nil {
			var err error
			if cc, err = c.dial(node.Address); err != nil {
				p.Info(err)
				return
			}
			conns[node.Address] = cc
		}
		c.noteAttempt(payload, attempt{node.Id, term})
		actx, acancel := context.WithTimeout(octx, time.Second)
		resp, err := coordpb.NewStreamingNodeServiceClient(cc).Append(actx, &coordpb.AppendRequest{Vchannel: vch, Term: term, Payload: []byte(payload),
			NodeId: node.Id, Epoch: node.Epoch})
		acancel()
		if err == nil {
			out := AppendOut{Node: node.Id, Addr: node.Address, Attempts: attempts}
			if resp.Id != nil {
				out.Term, out.Offset = resp.Id.Term, resp.Id.Offset
			}
			p.Ok(out)
			return
		}
		if !staleView(err) {
			p.Info(err)
			return
		}
		lastErr = err
		if _, werr := w.WaitNewer(octx, view.Version); werr != nil {
			p.Fail(fmt.Errorf("%v; no newer view: %w", err, werr))
			return
		}
	}
}

// zombie appends to a PChannel's previous owner at the previous term each
// time the PChannel moves to another node (after a moment, so the new
// owner has written at its term).
func (c *Channels) zombie(ctx context.Context, id int, w *client.Watcher, rec *history.Recorder, names []string) {
	type owner struct {
		node *coordpb.StreamingNode
		term int64
	}
	conns := map[string]*grpc.ClientConn{}
	defer func() {
		for _, cc := range conns {
			cc.Close()
		}
	}()
	prev := map[string]owner{}
	var v client.Version
	for n := 0; ; {
		view, err := w.WaitNewer(ctx, v)
		if err != nil {
			return
		}
		v = view.Version
		for _, p := range names {
			node, term, ok := view.Owner(p)
			if !ok {
				continue
			}
			old, had := prev[p]
			prev[p] = owner{node, term}
			if !had || old.node.Id == node.Id || old.term >= term {
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(300 * time.Millisecond):
			}
			c.zombieAppend(ctx, conns, rec, id, old.node, old.term, p+"_150v0", fmt.Sprintf("z%d-%d", id, n))
			n++
		}
	}
}

func (c *Channels) zombieAppend(ctx context.Context, conns map[string]*grpc.ClientConn, rec *history.Recorder, id int,
	node *coordpb.StreamingNode, term int64, vch, payload string) {
	p := rec.Invoke(id, "append", AppendIn{VChannel: vch, Payload: payload})
	cc := conns[node.Address]
	if cc == nil {
		var err error
		if cc, err = c.dial(node.Address); err != nil {
			p.Fail(err) // nothing was sent
			return
		}
		conns[node.Address] = cc
	}
	c.noteAttempt(payload, attempt{node.Id, term})
	actx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := coordpb.NewStreamingNodeServiceClient(cc).Append(actx, &coordpb.AppendRequest{Vchannel: vch, Term: term,
		Payload: []byte(payload), NodeId: node.Id, Epoch: node.Epoch})
	switch {
	case err == nil:
		out := AppendOut{Node: node.Id, Addr: node.Address, Attempts: 1}
		if resp.Id != nil {
			out.Term, out.Offset = resp.Id.Term, resp.Id.Offset
		}
		p.Ok(out)
	case status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.InvalidArgument:
		p.Fail(err) // refused before anything was written
	default:
		p.Info(err)
	}
}

func (c *Channels) noteAttempt(payload string, a attempt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sent == nil {
		c.sent = map[string][]attempt{}
	}
	c.sent[payload] = append(c.sent[payload], a)
}
