package flush

import (
	"sort"
	"time"

	"github.com/coordd/coordd/commands/logpb"
)

// GrowingView is what the seal policy knows about one growing segment.
type GrowingView struct {
	ID       int64
	VChannel string
	// Bytes: the larger of what was allocated in this term and what the
	// binlogs hold.
	Bytes       int64
	Capacity    int64
	Created     time.Time
	LastWrite   time.Time
	BinlogFiles int
}

// Decision seals one segment for a reason.
type Decision struct {
	ID     int64
	Reason logpb.SealReason
}

// Decide is the seal policy: pure in (view, now, cfg). Per segment, in
// order: capacity, binlog count, lifetime, idle; then per VChannel, while
// its growing bytes exceed the limit, the largest remaining segment. Each
// segment is decided at most once. The result is sorted by segment ID.
func Decide(view []GrowingView, now time.Time, cfg Config) []Decision {
	var out []Decision
	sealed := map[int64]bool{}
	byChan := map[string][]GrowingView{}
	for _, g := range view {
		var r logpb.SealReason
		switch {
		case g.Bytes >= g.Capacity && g.Bytes > 0:
			r = logpb.SealReason_SEAL_CAPACITY
		case g.BinlogFiles >= cfg.MaxBinlogFiles:
			r = logpb.SealReason_SEAL_BINLOG_NUMBER
		case now.Sub(g.Created) >= cfg.MaxLifetime:
			r = logpb.SealReason_SEAL_LIFETIME
		case now.Sub(g.LastWrite) >= cfg.MaxIdle && g.Bytes > cfg.MinSizeFromIdleToSealed:
			r = logpb.SealReason_SEAL_IDLE
		}
		if r != logpb.SealReason_SEAL_NONE {
			out = append(out, Decision{ID: g.ID, Reason: r})
			sealed[g.ID] = true
			continue
		}
		byChan[g.VChannel] = append(byChan[g.VChannel], g)
	}
	for _, gs := range byChan {
		var total int64
		for _, g := range gs {
			total += g.Bytes
		}
		if total <= cfg.ChannelGrowingBytes {
			continue
		}
		sort.Slice(gs, func(i, j int) bool {
			if gs[i].Bytes != gs[j].Bytes {
				return gs[i].Bytes > gs[j].Bytes
			}
			return gs[i].ID < gs[j].ID
		})
		for _, g := range gs {
			if total <= cfg.ChannelGrowingBytes {
				break
			}
			out = append(out, Decision{ID: g.ID, Reason: logpb.SealReason_SEAL_GROWING_BYTES})
			total -= g.Bytes
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// FlushView is what the flush check knows about one sealed segment.
type FlushView struct {
	ID     int64
	SealTs uint64
	// ExpireTs / Expire: when the last allocation into it expires (the
	// term's start + expiry for segments this leader inherited).
	ExpireTs uint64
	Expire   time.Time
	// Tick: the VChannel's reported time tick (0: none this term).
	Tick uint64
}

// Flushable: the VChannel's time tick has passed the seal time and the
// last allocation's expiry, and that expiry is over — so every row the
// segment will ever hold has been consumed by its flusher.
func Flushable(v FlushView, now time.Time) bool {
	return v.Tick > 0 && v.Tick >= v.SealTs && v.Tick >= v.ExpireTs && !now.Before(v.Expire)
}
