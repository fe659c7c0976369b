package nemesis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// killNodes SIGKILLs the victims (the leader first if the step says so, or
// always for KillLeader), holds, and restarts them.
type killNodes struct{}

func (killNodes) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	victims := n.victims(ctx, s)
	if len(victims) == 0 {
		return errors.New("no victim")
	}
	w.Targets = n.ids(victims)
	w.Start = n.c.Now()
	var err error
	for _, v := range victims {
		if e := n.c.Kill(v); e != nil {
			err = errors.Join(err, e)
		}
	}
	sleep(ctx, hold)
	for _, v := range victims {
		if e := n.c.Start(v); e != nil {
			err = errors.Join(err, e)
		}
	}
	for _, v := range victims {
		if e := n.c.WaitReady(context.WithoutCancel(ctx), v, n.ready(30*time.Second)); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

// pauseNodes SIGSTOPs the victims for longer than an election, then
// SIGCONTs them.
type pauseNodes struct{}

func (pauseNodes) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	victims := n.victims(ctx, s)
	if len(victims) == 0 {
		return errors.New("no victim")
	}
	w.Targets = n.ids(victims)
	w.Start = n.c.Now()
	w.Detail = fmt.Sprintf("SIGSTOP for %v (election timeout %v)", hold.Round(time.Millisecond), n.cfg.ElectionTimeout)
	var err error
	for _, v := range victims {
		if e := n.c.Pause(v); e != nil {
			err = errors.Join(err, e)
		}
	}
	sleep(ctx, hold)
	for _, v := range victims {
		if e := n.c.Resume(v); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}

// transfer moves leadership through the API, to a chosen follower or to
// whichever member raft picks.
type transfer struct{}

func (transfer) run(ctx context.Context, n *Nemesis, s Step, _ time.Duration, w *Window) error {
	l := n.leader(ctx)
	target := ""
	if fs := n.followers(l); l >= 0 && !s.TargetLeader && len(fs) > 0 {
		target = n.c.ID(fs[s.Follower%len(fs)])
	}
	w.Targets = "any"
	if target != "" {
		w.Targets = target
	}
	if l >= 0 {
		w.Detail = "from " + n.c.ID(l)
	}
	w.Start = n.c.Now()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := n.admin.TransferLeader(cctx, target)
	return err
}

// removeReadd removes a follower from the configuration, stops it, adds it
// back and restarts it from its data dir.
type removeReadd struct{}

func (removeReadd) run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error {
	w.Start = n.c.Now()
	v, err := n.removeReadd(ctx, s, hold, w)
	if v >= 0 {
		w.Targets = n.c.ID(v)
	}
	return err
}

// restartAll SIGKILLs every member at once and restarts them all.
type restartAll struct{}

func (restartAll) run(ctx context.Context, n *Nemesis, _ Step, hold time.Duration, w *Window) error {
	w.Targets = "all"
	w.Start = n.c.Now()
	all := n.all()
	var wg sync.WaitGroup
	var emu sync.Mutex
	var err error
	for _, i := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if e := n.c.Kill(i); e != nil {
				emu.Lock()
				err = errors.Join(err, e)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	sleep(ctx, hold)
	for _, i := range all {
		if e := n.c.Start(i); e != nil {
			err = errors.Join(err, e)
		}
	}
	for _, i := range all {
		if e := n.c.WaitReady(context.WithoutCancel(ctx), i, n.ready(30*time.Second)); e != nil {
			err = errors.Join(err, e)
		}
	}
	return err
}
