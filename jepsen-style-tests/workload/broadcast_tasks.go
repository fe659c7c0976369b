package workload

import (
	"context"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// FBroadcastTasks is the history f of the final task listing.
const FBroadcastTasks = "broadcast-tasks"

// TaskView is one broadcast task as coordd lists it at the end of a run.
type TaskView struct {
	ID        uint64   `json:"id"`
	Type      string   `json:"type"`
	State     string   `json:"state"`
	Idem      string   `json:"idem,omitempty"` // the scoped idempotency key
	VChannels []string `json:"vchannels"`      // the targets, the CChannel included
	Abandoned bool     `json:"abandoned,omitempty"`
}

// TaskList is the output of the final listing. Settled says no task was
// pending when it was taken, so every task that will ever append has.
type TaskList struct {
	Tasks   []TaskView `json:"tasks"`
	Settled bool       `json:"settled"`
}

// Bounds of the final listing: how long it waits for pending tasks to
// finish (the cluster is healed, so they finish in about a second), and
// how long it keeps trying to read. It asks for client.MaxListBroadcasts
// tasks: coordd keeps up to 8,192 tombstones plus the pending ones.
const (
	settleWait   = 10 * time.Second
	listAttempts = 20 * time.Second
)

// listTasks records every broadcast task coordd keeps, once no task is
// pending (or settleWait has passed): an ok op FBroadcastTasks with a
// TaskList, info if coordd could not be read. Taken after the load
// stopped, so every call of the workload has ended; a call cut off by the
// load's end may still create its task later (the checker allows for it).
func listTasks(env Env, id int) {
	ctx, cancel := context.WithTimeout(context.Background(), listAttempts+settleWait)
	defer cancel()
	p := env.Recorder.Invoke(id, FBroadcastTasks, nil)
	cl, err := client.New(ctx, env.Config(RoleRead, client.Config{Endpoints: env.Endpoints(0), RequestTimeout: 5 * time.Second}))
	if err != nil {
		p.Info(err)
		return
	}
	defer cl.Close()
	deadline := time.Now().Add(settleWait)
	for {
		pending, err := cl.ListBroadcasts(ctx, true, 1)
		if (err == nil && len(pending) == 0) || time.Now().After(deadline) {
			break
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	all, err := cl.ListBroadcasts(ctx, false, client.MaxListBroadcasts)
	if err != nil {
		p.Info(err)
		return
	}
	out := TaskList{Settled: true}
	for _, t := range all {
		out.Tasks = append(out.Tasks, taskView(t))
		if t.State == "PENDING" {
			out.Settled = false
		}
	}
	p.Ok(out)
}

func taskView(t *coordpb.BroadcastInfo) TaskView {
	return TaskView{ID: t.BroadcastId, Type: t.MessageType, State: t.State, Idem: t.IdempotencyKey,
		VChannels: t.Vchannels, Abandoned: t.AbandonedReason != ""}
}

// taskList is the last ok FBroadcastTasks output of ops, if any.
func taskList(ops []history.Op) (TaskList, bool) {
	var out TaskList
	found := false
	for _, o := range ops {
		if o.F == FBroadcastTasks && o.Type == history.Ok && decode(o.Output, &out) == nil {
			found = true
		}
	}
	return out, found
}
