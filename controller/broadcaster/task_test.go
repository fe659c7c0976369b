package broadcaster

import (
	"fmt"
	"testing"
)

// TestTaskTransitions fires every event at every state (and, for running
// and locking, every recorded request) and checks the result against the
// state machine in task's doc comment: the legal moves listed here happen,
// every other event is refused and leaves the task exactly as it was.
func TestTaskTransitions(t *testing.T) {
	type from struct {
		state   taskState
		pending request
	}
	type want struct {
		state   taskState
		pending request
		ok      bool // the event reported a move (or a change of state)
	}
	events := map[string]func(*task) bool{
		"enqueue": (*task).enqueue,
		"start":   (*task).start,
		"finish":  (*task).finish,
		"nudge":   (*task).nudge,
		"locked":  func(k *task) bool { old := k.state; return k.locked() != old },
		"abort":   func(k *task) bool { old := k.state; k.abort(); return k.state != old },
	}
	for name, out := range map[string]outcome{"done": outDone, "backoff": outBackoff, "assign": outAssign, "idle": outIdle} {
		events["end:"+name] = func(k *task) bool { old := k.state; return k.end(out) != old }
	}
	running := func(p request) from { return from{stateRunning, p} }
	legal := map[from]map[string]want{
		{stateIdle, requestNone}: {
			"enqueue": {stateQueued, requestNone, true},
			"finish":  {stateFinished, requestNone, true},
		},
		{stateLocking, requestNone}: {
			"locked": {stateIdle, requestNone, true},
			"finish": {stateLocking, requestFinish, false},
		},
		{stateLocking, requestFinish}: {
			"locked": {stateFinished, requestNone, true},
		},
		{stateQueued, requestNone}: {
			"start":  {stateRunning, requestNone, true},
			"finish": {stateFinished, requestNone, true},
		},
		running(requestNone): {
			"enqueue":     {stateRunning, requestRerun, false},
			"nudge":       {stateRunning, requestNudge, false},
			"finish":      {stateRunning, requestFinish, false},
			"abort":       {stateIdle, requestNone, true},
			"end:done":    {stateFinished, requestNone, true},
			"end:backoff": {stateBackoff, requestNone, true},
			"end:assign":  {stateAssignWait, requestNone, true},
			"end:idle":    {stateAwaitingAcks, requestNone, true},
		},
		running(requestNudge): {
			"enqueue":     {stateRunning, requestRerun, false},
			"finish":      {stateRunning, requestFinish, false},
			"abort":       {stateIdle, requestNone, true},
			"end:done":    {stateFinished, requestNone, true},
			"end:backoff": {stateBackoff, requestNone, true},
			"end:assign":  {stateAssignWait, requestNone, true},
			"end:idle":    {stateQueued, requestNone, true},
		},
		running(requestRerun): {
			"finish":      {stateRunning, requestFinish, false},
			"abort":       {stateIdle, requestNone, true},
			"end:done":    {stateFinished, requestNone, true},
			"end:backoff": {stateQueued, requestNone, true},
			"end:assign":  {stateQueued, requestNone, true},
			"end:idle":    {stateQueued, requestNone, true},
		},
		running(requestFinish): {
			"abort":       {stateIdle, requestNone, true},
			"end:done":    {stateFinished, requestNone, true},
			"end:backoff": {stateFinished, requestNone, true},
			"end:assign":  {stateFinished, requestNone, true},
			"end:idle":    {stateFinished, requestNone, true},
		},
		{stateBackoff, requestNone}: {
			"enqueue": {stateQueued, requestNone, true},
			"finish":  {stateFinished, requestNone, true},
		},
		{stateAssignWait, requestNone}: {
			"enqueue": {stateQueued, requestNone, true},
			"finish":  {stateFinished, requestNone, true},
		},
		{stateAwaitingAcks, requestNone}: {
			"enqueue": {stateQueued, requestNone, true},
			"nudge":   {stateQueued, requestNone, true},
			"finish":  {stateFinished, requestNone, true},
		},
		{stateFinished, requestNone}: {}, // terminal: every event is refused
	}
	for f, moves := range legal {
		for name := range moves {
			if _, ok := events[name]; !ok {
				t.Fatalf("%v: legal move names unknown event %q", f, name)
			}
		}
		for name, fire := range events {
			t.Run(fmt.Sprintf("%s+%d/%s", f.state, f.pending, name), func(t *testing.T) {
				w, isLegal := moves[name]
				if !isLegal {
					w = want{f.state, f.pending, false}
				}
				k := &task{state: f.state, pending: f.pending}
				ok := fire(k)
				if k.state != w.state || k.pending != w.pending || ok != w.ok {
					t.Fatalf("got (%s, pending %d, ok %v), want (%s, pending %d, ok %v)",
						k.state, k.pending, ok, w.state, w.pending, w.ok)
				}
				if k.state != stateRunning && k.state != stateLocking && k.pending != requestNone {
					t.Fatalf("state %s holds a pending request %d", k.state, k.pending)
				}
			})
		}
	}
	// Every state is a starting point of the table.
	seen := map[taskState]bool{}
	for f := range legal {
		seen[f.state] = true
	}
	for s := stateIdle; s <= stateFinished; s++ {
		if !seen[s] {
			t.Errorf("state %s has no row", s)
		}
	}
}
