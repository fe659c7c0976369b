package flush

import "time"

// roundDuty bounds the share of a core the seal/flush rounds may take: a
// round that took d is followed by at least roundDuty×d of rest before the
// next one starts, whatever triggers it (the ticker or a time-tick
// report). A round reads every active segment, so its cost grows with the
// state: 0.1 ms at a few thousand segments (rounds follow ticks within a
// millisecond) but tens of milliseconds at Milvus-max's hundreds of
// thousands, where time-tick reports arriving many times a second would
// otherwise run rounds back to back (docs/scaling.md#milvus-max).
const roundDuty = 10

// pacer holds when the next round may start.
type pacer struct {
	restUntil time.Time
}

// ran records a round that started at start and ended at end.
func (p *pacer) ran(start, end time.Time) {
	p.restUntil = end.Add(roundDuty * end.Sub(start))
}

// wait is how long a round due at now must wait.
func (p *pacer) wait(now time.Time) time.Duration {
	return max(0, p.restUntil.Sub(now))
}
