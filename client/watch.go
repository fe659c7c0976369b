package client

import (
	"context"
	"errors"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// Version is an assignment version; pairs compare lexicographically.
type Version struct{ Global, Local uint64 }

// Less orders versions.
func (v Version) Less(o Version) bool {
	return v.Global < o.Global || v.Global == o.Global && v.Local < o.Local
}

func versionOf(p *coordpb.Version) Version {
	return Version{Global: p.GetGlobal(), Local: p.GetLocal()}
}

// AssignmentView is the assignment state a watcher holds: every live
// streaming node and every PChannel (in any state).
type AssignmentView struct {
	Version         Version
	CChannel        string
	Nodes           map[uint64]*coordpb.StreamingNode
	Channels        map[string]*coordpb.ChannelAssignment
	ReplicateConfig *coordpb.ReplicateConfiguration
}

// Owner returns the node holding pchannel and its term, if the channel is
// ASSIGNED to a live node.
func (v *AssignmentView) Owner(pchannel string) (node *coordpb.StreamingNode, term int64, ok bool) {
	ch, found := v.Channels[pchannel]
	if !found || ch.State != "ASSIGNED" {
		return nil, 0, false
	}
	n, live := v.Nodes[ch.NodeId]
	return n, ch.Term, live
}

// Assigned lists the ASSIGNED channels of node, sorted.
func (v *AssignmentView) Assigned(node uint64) []string {
	var out []string
	for name, ch := range v.Channels {
		if ch.State == "ASSIGNED" && ch.NodeId == node {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (v *AssignmentView) clone() *AssignmentView {
	out := &AssignmentView{Version: v.Version, CChannel: v.CChannel, ReplicateConfig: v.ReplicateConfig,
		Nodes: make(map[uint64]*coordpb.StreamingNode, len(v.Nodes)), Channels: make(map[string]*coordpb.ChannelAssignment, len(v.Channels))}
	for k, n := range v.Nodes {
		out.Nodes[k] = n
	}
	for k, c := range v.Channels {
		out.Channels[k] = c
	}
	return out
}

// apply merges an update into the view; it reports false (and changes
// nothing) unless the update's version is strictly newer.
func (v *AssignmentView) apply(u *coordpb.AssignmentUpdate) bool {
	nv := versionOf(u.Version)
	if !v.Version.Less(nv) {
		return false
	}
	if u.Full {
		v.Nodes = map[uint64]*coordpb.StreamingNode{}
		v.Channels = map[string]*coordpb.ChannelAssignment{}
	}
	for _, n := range u.Nodes {
		if n.State == "DOWN" {
			delete(v.Nodes, n.Id)
		} else {
			v.Nodes[n.Id] = n
		}
	}
	for _, c := range u.Channels {
		v.Channels[c.Pchannel] = c
	}
	v.Version, v.CChannel, v.ReplicateConfig = nv, u.Cchannel, u.ReplicateConfig
	return true
}

// Watcher follows the assignment stream across coordd members. It keeps
// the newest view it has accepted — versions only move forward, even when
// a reconnect lands on a lagging member — and resumes from it, so a
// reconnect costs a delta, not a full view.
type Watcher struct {
	c *Client

	mu      sync.Mutex
	view    *AssignmentView
	has     bool
	changed chan struct{}

	reported map[string]int64 // pchannel → highest term reported broken
}

// NewWatcher returns a watcher; Run drives it.
func (c *Client) NewWatcher() *Watcher {
	return &Watcher{c: c, view: &AssignmentView{Nodes: map[uint64]*coordpb.StreamingNode{},
		Channels: map[string]*coordpb.ChannelAssignment{}}, changed: make(chan struct{}), reported: map[string]int64{}}
}

// Run streams until ctx ends, reconnecting to any member (50 ms between
// failed attempts). It returns ctx.Err() or ErrClosed.
func (w *Watcher) Run(ctx context.Context) error {
	for {
		for _, addr := range w.c.order() {
			if err := ctx.Err(); err != nil {
				return err
			}
			err := w.follow(ctx, addr)
			if errors.Is(err, ErrClosed) {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

func (w *Watcher) follow(ctx context.Context, addr string) error {
	cc, err := w.c.conn(addr)
	if err != nil {
		return err
	}
	req := &coordpb.WatchAssignmentsRequest{}
	w.mu.Lock()
	if w.has {
		req.FromVersion = &coordpb.Version{Global: w.view.Version.Global, Local: w.view.Version.Local}
	}
	w.mu.Unlock()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := coordpb.NewChannelsClient(cc).WatchAssignments(sctx, req)
	if err != nil {
		return err
	}
	for {
		u, err := stream.Recv()
		if err == io.EOF {
			return errors.New("assignment stream ended")
		}
		if err != nil {
			return err
		}
		w.accept(u)
	}
}

func (w *Watcher) accept(u *coordpb.AssignmentUpdate) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.has && !w.view.Version.Less(versionOf(u.Version)) {
		return
	}
	if !w.has && !u.Full {
		return // a delta without a base is useless; the server sends full first
	}
	next := w.view.clone()
	if !next.apply(u) {
		return
	}
	w.view, w.has = next, true
	close(w.changed)
	w.changed = make(chan struct{})
}

// View returns the newest accepted view (nil before the first one). The
// view is shared and must not be modified.
func (w *Watcher) View() *AssignmentView {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.has {
		return nil
	}
	return w.view
}

// WaitNewer blocks until a view newer than v is held (or ctx ends) and
// returns it.
func (w *Watcher) WaitNewer(ctx context.Context, v Version) (*AssignmentView, error) {
	for {
		w.mu.Lock()
		if w.has && v.Less(w.view.Version) {
			view := w.view
			w.mu.Unlock()
			return view, nil
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-ch:
		}
	}
}

// ReportBroken tells coordd the WAL of pchannel failed at term (for
// example the node said "not the owner"). Reports are deduplicated: only a
// term higher than any reported before for the channel is sent. A report
// whose call failed does not count, so it can be repeated.
func (w *Watcher) ReportBroken(ctx context.Context, pchannel string, term int64, cause error) (marked bool, err error) {
	w.mu.Lock()
	prev, had := w.reported[pchannel]
	if prev >= term {
		w.mu.Unlock()
		return false, nil
	}
	w.reported[pchannel] = term
	w.mu.Unlock()
	msg := ""
	if cause != nil {
		msg = cause.Error()
	}
	marked, err = w.c.ReportAssignmentError(ctx, pchannel, term, msg)
	if err != nil {
		w.mu.Lock()
		if w.reported[pchannel] == term { // no higher report since
			if had {
				w.reported[pchannel] = prev
			} else {
				delete(w.reported, pchannel)
			}
		}
		w.mu.Unlock()
	}
	return marked, err
}
