// Package pacing bounds the CPU share of a leader routine whose round
// reads the whole state (the flush manager's seal/flush rounds, the
// balancer's Decide): after a round that took d, the next one waits until
// Duty×d has passed, whatever triggers it. A round's cost grows with the
// state — a fraction of a millisecond at a few thousand records, tens of
// milliseconds at Milvus-max's (docs/scaling.md#milvus-max) — so at a
// small state rounds still follow their triggers within a millisecond,
// while at a large one triggers arriving many times a second cannot run
// rounds back to back.
package pacing

import "time"

// Duty is the rest after a round, in multiples of the round's duration:
// rounds take at most about 1/(Duty+1) of a core.
const Duty = 10

// Pacer holds when the next round may start. The zero value lets the
// first round start at once.
type Pacer struct {
	restUntil time.Time
}

// Ran records a round that started at start and ended at end.
func (p *Pacer) Ran(start, end time.Time) {
	p.restUntil = end.Add(Duty * end.Sub(start))
}

// Wait is how long a round due at now must wait.
func (p *Pacer) Wait(now time.Time) time.Duration {
	return max(0, p.restUntil.Sub(now))
}
