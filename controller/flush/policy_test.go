package flush

import (
	"reflect"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
)

func TestDecide(t *testing.T) {
	cfg := Config{MaxBinlogFiles: 4, MaxLifetime: time.Hour, MaxIdle: 10 * time.Minute, MinSizeFromIdleToSealed: 100,
		ChannelGrowingBytes: 1000}.WithDefaults()
	now := time.UnixMilli(10_000_000)
	fresh := func(id int64, vch string, bytes int64) GrowingView {
		return GrowingView{ID: id, VChannel: vch, Bytes: bytes, Capacity: 500, Created: now.Add(-time.Minute), LastWrite: now}
	}
	edit := func(g GrowingView, f func(*GrowingView)) GrowingView { f(&g); return g }
	tests := []struct {
		name string
		view []GrowingView
		want []Decision
	}{
		{"nothing to do", []GrowingView{fresh(1, "a", 10)}, nil},
		{"capacity", []GrowingView{fresh(1, "a", 500), fresh(2, "a", 499)}, []Decision{{1, logpb.SealReason_SEAL_CAPACITY}}},
		{"empty segments are never full", []GrowingView{edit(fresh(1, "a", 0), func(g *GrowingView) { g.Capacity = 0 })}, nil},
		{"binlog count", []GrowingView{edit(fresh(1, "a", 1), func(g *GrowingView) { g.BinlogFiles = 4 })},
			[]Decision{{1, logpb.SealReason_SEAL_BINLOG_NUMBER}}},
		{"lifetime", []GrowingView{edit(fresh(1, "a", 1), func(g *GrowingView) { g.Created = now.Add(-time.Hour) })},
			[]Decision{{1, logpb.SealReason_SEAL_LIFETIME}}},
		{"idle and big enough", []GrowingView{edit(fresh(1, "a", 101), func(g *GrowingView) { g.LastWrite = now.Add(-10 * time.Minute) })},
			[]Decision{{1, logpb.SealReason_SEAL_IDLE}}},
		{"idle but small stays", []GrowingView{edit(fresh(1, "a", 100), func(g *GrowingView) { g.LastWrite = now.Add(-time.Hour) })}, nil},
		{"channel over its growing bytes: largest first until below",
			[]GrowingView{fresh(1, "a", 400), fresh(2, "a", 450), fresh(3, "a", 300), fresh(5, "a", 420), fresh(4, "b", 450)},
			[]Decision{{2, logpb.SealReason_SEAL_GROWING_BYTES}, {5, logpb.SealReason_SEAL_GROWING_BYTES}}},
		{"a segment sealed for capacity does not count twice",
			[]GrowingView{fresh(1, "a", 600), fresh(2, "a", 450), fresh(3, "a", 300)},
			[]Decision{{1, logpb.SealReason_SEAL_CAPACITY}}},
	}
	for _, tt := range tests {
		got := Decide(tt.view, now, cfg)
		want := tt.want
		if len(want) > 1 { // the result is sorted by ID
			for i := 0; i < len(want); i++ {
				for j := i + 1; j < len(want); j++ {
					if want[j].ID < want[i].ID {
						want[i], want[j] = want[j], want[i]
					}
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, want)
		}
	}
}

func TestFlushable(t *testing.T) {
	now := time.UnixMilli(1000)
	base := FlushView{ID: 1, SealTs: 100, ExpireTs: 200, Expire: now, Tick: 200}
	if !Flushable(base, now) {
		t.Fatal("tick at seal and expiry, expiry over: flushable")
	}
	for name, v := range map[string]FlushView{
		"no tick":           {ID: 1, SealTs: 100, ExpireTs: 200, Expire: now},
		"tick below seal":   {ID: 1, SealTs: 300, ExpireTs: 200, Expire: now, Tick: 250},
		"tick below expiry": {ID: 1, SealTs: 100, ExpireTs: 300, Expire: now, Tick: 250},
		"expiry not over":   {ID: 1, SealTs: 100, ExpireTs: 200, Expire: now.Add(time.Millisecond), Tick: 250},
	} {
		if Flushable(v, now) {
			t.Errorf("%s: flushable", name)
		}
	}
}

func TestCapacityIsDeterministicAndJittered(t *testing.T) {
	cfg := Config{}.WithDefaults()
	lo := int64(float64(cfg.SegmentMaxSize) * cfg.SealProportion * (1 - cfg.SealProportionJitter))
	hi := int64(float64(cfg.SegmentMaxSize) * cfg.SealProportion)
	seen := map[int64]bool{}
	for id := int64(1); id < 200; id++ {
		c := cfg.Capacity(id)
		if c < lo || c > hi || c != cfg.Capacity(id) {
			t.Fatalf("capacity of %d: %d not in [%d, %d] or not stable", id, c, lo, hi)
		}
		seen[c] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct capacities for 199 segments", len(seen))
	}
}
