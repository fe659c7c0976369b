package routines

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/allocator"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/controller/nodehealth"
	"github.com/coordd/coordd/testutil"
)

// The health tracker resets before any other routine starts, so nothing
// reads a previous term's sessions; the rest start in their listed order.
func TestRunResetsHealthBeforeStartingTheRoutines(t *testing.T) {
	clock := controllertest.NewClock()
	l := controllertest.NewLeader(t, clock, 3)
	id := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"}).GetRegisterNode().GetNodeId()
	ranIn := make(chan uint64, 1)
	set, err := New(l, Config{
		NodeHealth:  nodehealth.Config{Clock: clock},
		Broadcaster: &broadcaster.Config{Clock: clock},
		// A routine of a layer above (the API's bootstrap-token installer
		// in cmd/coordd) runs in the same set, after the controllers.
		Extra: []Routine{{Name: "bootstrap-token", Run: func(ctx context.Context, term uint64, _ commands.Proposer) {
			ranIn <- term
			<-ctx.Done()
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	if set.Health.Healthy(id) {
		t.Fatal("healthy before any leadership: the test cannot tell a reset")
	}
	var mu sync.Mutex
	var order []string
	set.starting = func(name string) {
		mu.Lock()
		defer mu.Unlock()
		if !set.Health.Healthy(id) {
			t.Errorf("%s started before the health tracker's reset", name)
		}
		order = append(order, name)
	}
	stop := controllertest.RunRoutine(t, l, set.Run, 3)
	testutil.Eventually(t, "every routine started", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 5
	})
	if term := <-ranIn; term != 3 {
		t.Fatalf("extra routine ran in term %d, want 3", term)
	}
	stop()
	if want := []string{"tso-window", "node-health", "broadcaster", "segments", "bootstrap-token"}; !slices.Equal(order, want) {
		t.Fatalf("start order %v, want %v", order, want)
	}
}

func TestNewNamesTheControllerWithABadConfig(t *testing.T) {
	l := controllertest.NewLeader(t, controllertest.NewClock(), 1)
	_, err := New(l, Config{Broadcaster: &broadcaster.Config{BackoffInitial: time.Second, BackoffMax: time.Millisecond}})
	if err == nil || !strings.Contains(err.Error(), "broadcaster:") {
		t.Fatalf("bad broadcaster config: %v", err)
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Fatal("New without a node succeeded")
	}
	if _, err := New(l, Config{Extra: []Routine{{Name: "no-func"}}}); err == nil || !strings.Contains(err.Error(), "no-func") {
		t.Fatalf("extra routine without a function: %v", err)
	}
}

// TestRoutinesProposeThroughTheirProposer: the controllers propose their
// routine work through the proposer Run hands them (raftnode's: decisions
// of the routine's term that wait in a full queue), never through the
// node: the TSO window's extension and a node marked down come with the
// routine mark and the term.
func TestRoutinesProposeThroughTheirProposer(t *testing.T) {
	clock := controllertest.NewClock()
	l := controllertest.NewLeader(t, clock, 3)
	id := l.MustPropose(t, &logpb.RegisterStreamingNode{Address: "10.0.0.1:1", Incarnation: "a"}).GetRegisterNode().GetNodeId()
	set, err := New(l, Config{NodeHealth: nodehealth.Config{Clock: clock, TTL: time.Second}, TSO: allocator.TSOConfig{Clock: clock}})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	start := len(l.Applied())
	stop := controllertest.RunRoutine(t, l, set.Run, 3)
	testutil.Eventually(t, "the silent node to be marked down", func() bool {
		clock.Advance(100 * time.Millisecond)
		n, ok := l.State().StreamingNode(id)
		return !ok || n.State == logpb.NodeState_NODE_DOWN
	})
	stop()
	applied, terms, marks := l.Applied(), l.DecisionTerms(), l.RoutineMarks()
	var extended, down bool
	for i := start; i < len(applied); i++ {
		if terms[i] != 3 || !marks[i] {
			t.Errorf("%T proposed with decision term %d, routine mark %v; want term 3 and the mark", applied[i], terms[i], marks[i])
		}
		switch applied[i].(type) {
		case *logpb.ExtendTSOWindow:
			extended = true
		case *logpb.MarkStreamingNodeDown:
			down = true
		}
	}
	if !extended || !down {
		t.Fatalf("the routines proposed a window extension: %v, a node down: %v; the test needs both", extended, down)
	}
}
