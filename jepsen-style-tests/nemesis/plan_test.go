package nemesis

import (
	"reflect"
	"testing"
	"time"
)

func TestPlanIsReproducibleAndBounded(t *testing.T) {
	cfg := Config{Seed: 42, Kinds: AllKinds, Duration: time.Minute, MaxFaults: 1000,
		QuietMin: 500 * time.Millisecond, QuietMax: 1500 * time.Millisecond,
		HoldMin: time.Second, HoldMax: 3 * time.Second, ElectionTimeout: 400 * time.Millisecond}
	a, b := Plan(cfg, 5), Plan(cfg, 5)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different plans")
	}
	cfg.Seed = 43
	if reflect.DeepEqual(a, Plan(cfg, 5)) {
		t.Fatal("different seeds, same plan")
	}
	// Every kind appears before any repeats.
	seen := map[Kind]bool{}
	for _, s := range a[:len(AllKinds)] {
		if seen[s.Kind] {
			t.Fatalf("%s repeated before every kind ran", s.Kind)
		}
		seen[s.Kind] = true
	}
	var total time.Duration
	for _, s := range a {
		total += s.Quiet + s.Hold
		if s.Kind == PauseNode && s.Hold < 3*cfg.ElectionTimeout {
			t.Fatalf("pause of %v is not longer than the election timeout", s.Hold)
		}
		if s.Count < 1 || s.Count > 2 {
			t.Fatalf("count %d on 5 nodes", s.Count)
		}
	}
	if total < cfg.Duration || total > cfg.Duration+cfg.QuietMax+cfg.HoldMax {
		t.Fatalf("plan covers %v for a %v duration", total, cfg.Duration)
	}
	cfg.MaxFaults = 3
	if n := len(Plan(cfg, 3)); n != 3 {
		t.Fatalf("MaxFaults 3 gave %d steps", n)
	}
}

func TestPlanSchedulesClientCut(t *testing.T) {
	cfg := Config{Seed: 7, Kinds: append(append([]Kind(nil), AllKinds...), ClientCut), First: ClientKinds,
		Duration: time.Minute, MaxFaults: 1000,
		QuietMin: 500 * time.Millisecond, QuietMax: 1500 * time.Millisecond,
		HoldMin: time.Second, HoldMax: 3 * time.Second}
	for _, n := range []int{3, 5} {
		plan := Plan(cfg, n)
		if plan[0].Kind != ClientCut {
			t.Fatalf("%d nodes: first step is %s, want %s (First)", n, plan[0].Kind, ClientCut)
		}
		// After First, every kind (client-cut included) once before repeats.
		seen := map[Kind]bool{}
		for _, s := range plan[1 : 1+len(cfg.Kinds)] {
			if seen[s.Kind] {
				t.Fatalf("%d nodes: %s repeated before every kind ran", n, s.Kind)
			}
			seen[s.Kind] = true
		}
		if !seen[ClientCut] {
			t.Fatalf("%d nodes: client-cut not planned among the kinds", n)
		}
		for _, s := range plan {
			if s.Kind == ClientCut && (s.Hold < cfg.HoldMin || len(s.Perm) != n) {
				t.Fatalf("%d nodes: bad client-cut step %+v", n, s)
			}
		}
	}
	// Without First the schedule is what it always was.
	cfg.First = nil
	cfg.Kinds = AllKinds
	a := Plan(cfg, 5)
	cfg.First = []Kind{}
	if !reflect.DeepEqual(a, Plan(cfg, 5)) {
		t.Fatal("an empty First changed the plan")
	}
}
