package nodehealth

import "time"

// A live streaming node is silent when its last heartbeat is late: it
// still holds its PChannels (UP in the FSM, within the TTL) but nothing
// says it serves them, so writes to them fail until it beats again or the
// TTL runs out and the node is marked DOWN and its PChannels move. The
// status page and 'coordctl pchannel list' show the state so that nobody
// reads the TTL gap as healthy (docs/operations.md#silent-streaming-nodes).
// Silence is leader memory like the heartbeats it is judged from: nothing
// goes through the log.

// silentAfter is the rule, a pure function of the TTL and the interval the
// node declares: two heartbeats missed (twice the interval), but never
// less than a tenth of the TTL, so that a node beating very fast does not
// flap between silent and UP on a busy leader. A node that declares no
// interval (an older build, or no heartbeat yet in this leadership) is
// silent after half the TTL. At the defaults (--node-ttl 10s,
// --heartbeat-interval 1s) that is 2s: a SIGKILLed node is silent at most
// 2s after it died, 8s before the TTL moves its PChannels. When the rule
// reaches the TTL the node goes from UP to DOWN with no silent stage.
func silentAfter(ttl, interval time.Duration) time.Duration {
	if interval <= 0 {
		return ttl / 2
	}
	return max(2*interval, ttl/10)
}

// SilentAfter is how long node may go without a heartbeat before it
// counts as silent (silentAfter over the interval its session declared).
func (t *Tracker) SilentAfter(node uint64) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var interval time.Duration
	if s, ok := t.sessions[node]; ok {
		interval = s.interval
	}
	return silentAfter(t.cfg.TTL, interval)
}
