package pacing

import (
	"testing"
	"time"
)

func TestPacerRestsDutyTimesTheRound(t *testing.T) {
	var p Pacer
	t0 := time.Unix(1000, 0)
	if d := p.Wait(t0); d != 0 {
		t.Fatalf("first round waits %v", d)
	}
	p.Ran(t0, t0.Add(50*time.Millisecond))
	if d := p.Wait(t0.Add(50 * time.Millisecond)); d != Duty*50*time.Millisecond {
		t.Fatalf("after a 50ms round: wait %v, want %v", d, Duty*50*time.Millisecond)
	}
	if d := p.Wait(t0.Add(time.Second)); d != 0 {
		t.Fatalf("rested enough: wait %v", d)
	}
}
