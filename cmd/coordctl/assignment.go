package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/coordd/coordd/client"
)

var assignmentGroup = &group{
	name:    "assignment",
	summary: "follow the pchannel assignment stream",
	cmds: []*command{
		{name: "watch", summary: "print each newer assignment view: version, live nodes and ASSIGNED pchannels per node", bind: bindWatch},
	},
}

func bindWatch(fs *flag.FlagSet) func([]string) (action, error) {
	count := fs.Int("count", 0, "stop after `K` views (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after `D`, e.g. 30s (0: until interrupted)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		if *count < 0 {
			return action{}, fmt.Errorf("--count must not be negative, got %d", *count)
		}
		if *duration < 0 {
			return action{}, fmt.Errorf("--duration must not be negative, got %v", *duration)
		}
		k, d := *count, *duration
		return action{what: "assignment watch", run: func(ctx context.Context, e *env) error {
			return watchAssignments(ctx, e, k, d)
		}}, nil
	}
}

// watchAssignments runs a watcher (which follows the stream across members
// and keeps only strictly newer versions) and prints the views it holds
// until k views were printed, d passed or ctx ended (Ctrl-C). Views
// accepted in quick succession may be printed as one: the newest.
func watchAssignments(ctx context.Context, e *env, k int, d time.Duration) error {
	wctx, cancel := context.WithCancel(ctx)
	if d > 0 {
		wctx, cancel = context.WithTimeout(ctx, d)
	}
	defer cancel()
	w := e.c.NewWatcher()
	runErr := make(chan error, 1)
	go func() {
		err := w.Run(wctx)
		cancel() // unblocks WaitNewer when Run gives up (client closed)
		runErr <- err
	}()

	var (
		last    client.Version
		printed int
	)
	for k == 0 || printed < k {
		view, err := w.WaitNewer(wctx, last)
		if err != nil {
			break
		}
		if err := printView(e, view); err != nil {
			cancel()
			<-runErr
			return err
		}
		last = view.Version
		printed++
	}
	cancel()
	err := <-runErr
	switch {
	case k > 0 && printed == k, ctx.Err() != nil:
		return nil // done, or interrupted by the user
	case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded):
		return err
	case printed == 0:
		return fmt.Errorf("no assignment view received within %v", d)
	}
	return nil
}

func printView(e *env, v *client.AssignmentView) error {
	ids := make([]uint64, 0, len(v.Nodes))
	for id := range v.Nodes {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if e.json {
		out := assignmentJSON{Version: versionJSON{Global: v.Version.Global, Local: v.Version.Local},
			CChannel: v.CChannel, Nodes: len(ids), Assigned: []nodeAssignmentJSON{}}
		for _, id := range ids {
			out.Assigned = append(out.Assigned, nodeAssignmentJSON{NodeID: id, State: v.Nodes[id].GetState(), Channels: len(v.Assigned(id))})
		}
		// One compact object per line, so that the output is JSON Lines.
		return json.NewEncoder(e.out).Encode(out)
	}
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%d=%d", id, len(v.Assigned(id))))
	}
	assigned := strings.Join(parts, " ")
	if assigned == "" {
		assigned = "-"
	}
	_, err := fmt.Fprintf(e.out, "%s  version %d.%d  nodes %d  assigned %s\n", time.Now().Format("15:04:05.000"),
		v.Version.Global, v.Version.Local, len(ids), assigned)
	return err
}
