package datapath

import (
	"sync"
	"time"
)

// checkpointWantTTL is how long a VChannel stays wanted after a flush
// state read found its checkpoint behind: long enough for a flusher's next
// tick report (200 ms by default) to learn it, short enough that a waiter
// that gave up stops costing commits soon.
const checkpointWantTTL = 10 * time.Second

// checkpointWants is leader memory of the VChannels whose checkpoint
// someone waits on (GetFlushState / GetFlushAllState found it behind). An
// idle flusher reports a checkpoint whose time tick moved but whose
// position did not only when coordd says it is wanted (ReportTimeTicks'
// checkpoint_wanted) or after its idle interval, so an idle cluster does
// not commit a checkpoint per VChannel per tick
// (docs/semantics.md#checkpoints). Losing it (a new leader) only delays a
// waiter by one more poll.
type checkpointWants struct {
	mu    sync.Mutex
	until map[string]time.Time // vchannel → wanted until
}

// WantCheckpoints tells the flushers, through their next tick reports,
// that a waiter needs fresh checkpoints of vchannels.
func (s *Service) WantCheckpoints(vchannels []string) { s.wants.want(vchannels, s.clock.Now()) }

// want marks vchannels wanted from now for checkpointWantTTL.
func (w *checkpointWants) want(vchannels []string, now time.Time) {
	if len(vchannels) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.until == nil {
		w.until = map[string]time.Time{}
	}
	for _, v := range vchannels {
		w.until[v] = now.Add(checkpointWantTTL)
	}
}

// wanted returns those of vchannels still wanted at now, in their order,
// and forgets expired entries.
func (w *checkpointWants) wanted(vchannels []string, now time.Time) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, v := range vchannels {
		until, ok := w.until[v]
		switch {
		case !ok:
		case now.After(until):
			delete(w.until, v)
		default:
			out = append(out, v)
		}
	}
	return out
}
