package manifest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/objectstore"
)

// Faults the property injects into publications, in proposal order.
var (
	errCrashBeforePropose = errors.New("test: leader died after writing the revision, before proposing")
	errLostAnswer         = errors.New("test: the command applied, its answer was lost")
)

// commitRecord is one finished commit of the property run. start and end
// are positions on one sequence shared by every committer (a logical
// clock), so "a finished before b started" is end(a) < start(b).
type commitRecord struct {
	seg        int64
	key        string
	version    int64 // acknowledged version (0 unless err == nil)
	err        error
	start, end int64
}

// TestManifestCommitProperties: random concurrent committers on a few
// segments, with the leader dying between revision write and proposal or
// losing the answer after the command applied, and the orphan collector
// running (grace 1 ns) the whole time. Then, for every segment:
// acknowledged versions are distinct and increase in real-time order;
// every revision still readable at an acknowledged version holds every
// mutation acknowledged with a lower version; the final revision holds
// every acknowledged and every applied-but-unanswered mutation and none of
// those whose proposal never happened; the collector never removed a
// revision a pointer references (the current one and every acknowledged
// one are still there) and, once quiet, left no revision above a pointer.
func TestManifestCommitProperties(t *testing.T) { manifestCommitProperties(t, nil) }

// manifestCommitProperties runs the property on a store from newStore for
// each case (a fresh directory when newStore is nil).
func manifestCommitProperties(t *testing.T, newStore func() objectstore.Store) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := Config{GCGrace: time.Nanosecond, GCInterval: time.Hour}
		if newStore != nil {
			cfg.Store = newStore()
		}
		f := newFixture(t, cfg)
		nseg := rapid.IntRange(1, 3).Draw(rt, "segments")
		segs := make([]int64, nseg)
		for i := range segs {
			segs[i] = int64(5 + i)
			if _, err := commitProto(context.Background(), f.c, createReq(segs[i])); err != nil {
				rt.Fatalf("create %d: %v", segs[i], err)
			}
		}
		faults := rapid.SliceOfN(rapid.IntRange(0, 5), 1, 12).Draw(rt, "faults") // 0: crash before, 1: lost answer, else none
		var proposals atomic.Int64
		pick := func() int {
			return faults[int(proposals.Add(1)-1)%len(faults)]
		}
		var lastFault sync.Map // commands whose answer the after-apply hook loses
		f.l.SetBeforePropose(func(body proto.Message) error {
			b, ok := body.(*logpb.CommitSegmentManifests)
			if !ok {
				return nil
			}
			switch pick() {
			case 0:
				return errCrashBeforePropose
			case 1:
				lastFault.Store(b, true)
			}
			return nil
		})
		f.l.SetAfterApply(func(body proto.Message) error {
			if _, ok := lastFault.LoadAndDelete(body); ok {
				return errLostAnswer
			}
			return nil
		})
		ncommitters := rapid.IntRange(2, 4).Draw(rt, "committers")
		scripts := make([][]int, ncommitters)
		for i := range scripts {
			scripts[i] = rapid.SliceOfN(rapid.IntRange(0, nseg-1), 1, 4).Draw(rt, fmt.Sprintf("script%d", i))
		}

		var clock atomic.Int64
		var mu sync.Mutex
		var recs []commitRecord
		stopGC := make(chan struct{})
		gcDone := make(chan struct{})
		go func() {
			defer close(gcDone)
			for {
				select {
				case <-stopGC:
					return
				default:
				}
				if _, err := f.c.CollectOrphans(context.Background(), false); err != nil {
					t.Errorf("collector: %v", err)
					return
				}
			}
		}()
		var wg sync.WaitGroup
		for i, script := range scripts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n, si := range script {
					r := commitRecord{seg: segs[si], key: fmt.Sprintf("c%d-%d", i, n), start: clock.Add(1)}
					resp, err := commitProto(context.Background(), f.c, statsReq(r.seg, r.key, "stats/"+r.key))
					r.end, r.err = clock.Add(1), err
					if err == nil {
						r.version = resp.Version
					}
					mu.Lock()
					recs = append(recs, r)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(stopGC)
		<-gcDone
		f.l.SetBeforePropose(nil)
		f.l.SetAfterApply(nil)
		if _, err := f.c.CollectOrphans(context.Background(), false); err != nil {
			rt.Fatalf("final collection: %v", err)
		}
		checkCommitRecords(rt, f, segs, recs)
	})
}

func checkCommitRecords(rt *rapid.T, f *fixture, segs []int64, recs []commitRecord) {
	ctx := context.Background()
	for _, seg := range segs {
		var acked []commitRecord
		for _, r := range recs {
			if r.seg != seg {
				continue
			}
			switch {
			case r.err == nil:
				acked = append(acked, r)
			case errors.Is(r.err, errCrashBeforePropose), errors.Is(r.err, errLostAnswer):
			default:
				rt.Fatalf("commit %s on segment %d: unexpected error %v", r.key, seg, r.err)
			}
		}
		for _, a := range acked {
			for _, b := range acked {
				if a.key != b.key && a.version == b.version {
					rt.Fatalf("segment %d: %s and %s both acknowledged version %d", seg, a.key, b.key, a.version)
				}
				if a.end < b.start && b.version <= a.version {
					rt.Fatalf("segment %d: %s (v%d) finished before %s started, which got v%d", seg, a.key, a.version, b.key, b.version)
				}
			}
		}
		base := commands.ManifestBase(testColl, 1, seg)
		for _, b := range acked {
			data, err := f.store.Get(ctx, commands.ManifestKey(base, b.version))
			if err != nil {
				rt.Fatalf("segment %d: acknowledged revision %d is gone: %v", seg, b.version, err)
			}
			rev, err := Decode(data)
			if err != nil {
				rt.Fatalf("segment %d: revision %d: %v", seg, b.version, err)
			}
			keys := statsKeys(rev.Stats)
			for _, a := range acked {
				if a.version <= b.version && !slices.Contains(keys, a.key) {
					rt.Fatalf("segment %d: revision %d lacks %s, acknowledged at v%d", seg, b.version, a.key, a.version)
				}
			}
		}
		got, err := f.c.Get(ctx, f.l.State(), seg)
		if err != nil {
			rt.Fatalf("segment %d: the pointer names an unreadable revision: %v", seg, err)
		}
		final := statsKeys(got.Revision.Stats)
		for _, r := range recs {
			if r.seg != seg {
				continue
			}
			in := slices.Contains(final, r.key)
			switch {
			case r.err == nil && !in:
				rt.Fatalf("segment %d: acknowledged %s missing from the final revision v%d", seg, r.key, got.Version)
			case errors.Is(r.err, errLostAnswer) && !in:
				rt.Fatalf("segment %d: %s applied (answer lost) but missing from v%d", seg, r.key, got.Version)
			case errors.Is(r.err, errCrashBeforePropose) && in:
				rt.Fatalf("segment %d: %s was never proposed but is in v%d", seg, r.key, got.Version)
			}
		}
		keys, err := f.store.List(ctx, base+"/")
		if err != nil {
			rt.Fatal(err)
		}
		for _, k := range keys {
			if _, v, ok := commands.ParseManifestKey(k); ok && v > got.Version {
				rt.Fatalf("segment %d: orphan %s (above v%d) left after a quiet collection", seg, k, got.Version)
			}
		}
	}
}

func statsKeys(stats []*coordpb.ManifestStatsEntry) []string {
	var out []string
	for _, s := range stats {
		out = append(out, s.Key)
	}
	return out
}

// hookStore runs beforeDelete (once, then clears it) before a Delete, so
// a property can interleave a publication between a collection pass's
// decision and its deletions; and it dates every object by the fake
// clock, so an object's age is exactly what the steps made it.
type hookStore struct {
	objectstore.Store
	clock        clockwork.Clock
	mu           sync.Mutex
	beforeDelete func()
	created      map[string]time.Time
}

func (h *hookStore) Create(ctx context.Context, key string, data []byte) error {
	if err := h.Store.Create(ctx, key, data); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.created == nil {
		h.created = map[string]time.Time{}
	}
	h.created[key] = h.clock.Now()
	return nil
}

func (h *hookStore) ListInfo(ctx context.Context, prefix string) ([]objectstore.ObjectInfo, error) {
	infos, err := h.Store.ListInfo(ctx, prefix)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range infos {
		if at, ok := h.created[infos[i].Key]; ok {
			infos[i].ModTime = at
		}
	}
	return infos, err
}

func (h *hookStore) Delete(ctx context.Context, key string) error {
	h.mu.Lock()
	f := h.beforeDelete
	h.beforeDelete = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
	return h.Store.Delete(ctx, key)
}

// TestCollectorInterleavingProperties: the orphan collector against the
// publication paths, with every interleaving drawn as an explicit step
// (no goroutines, so a failing schedule reproduces exactly). Steps: the
// owner writes a revision; publishes any written revision inline (late,
// stale or repeated); a structured commit; the clock advances; a
// collection pass, optionally with an inline publication applied just
// before its retirement commits or just before its first deletion; a new
// leader establishes itself; the deposed leader runs a pass from the
// state it last saw. After every step, every segment's pointer names an
// object that exists, and no object at or below a published version was
// deleted.
func TestCollectorInterleavingProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		o := newOwnerFixture(t)
		hs := &hookStore{Store: o.store, clock: o.clock}
		c := New(o.l, Config{Store: hs, Clock: o.clock, GCGrace: time.Minute})
		ctx := context.Background()
		second := o.l.MustPropose(t, &logpb.CreateSegment{CollectionId: testColl, PartitionId: 1, Vchannel: testVChannel, NodeId: o.node, PchannelTerm: 2})
		segs := []int64{o.seg, second.GetSegments().GetIds()[0]}
		written := map[int64][]int64{} // versions the owner wrote, per segment
		everPublished := map[string]bool{}
		term := uint64(1)
		type view struct {
			st   *fsm.State
			term uint64
		}
		var deposed *view
		base := func(seg int64) string { return commands.ManifestBase(testColl, 1, seg) }
		publish := func(label string) {
			seg := rapid.SampledFrom(segs).Draw(rt, label+" segment")
			if len(written[seg]) == 0 {
				return
			}
			v := rapid.SampledFrom(written[seg]).Draw(rt, label+" version")
			body := o.saveBody(commands.ManifestPointer{Base: base(seg), Version: v})
			body.SegmentId = seg
			if _, err := commands.Propose(ctx, o.l, body, ""); err != nil {
				rt.Fatalf("inline publication: %v", err)
			}
		}
		check := func(step int) {
			for _, seg := range segs {
				p, _, _ := o.l.State().ManifestPointer(seg)
				if p.IsZero() {
					continue
				}
				everPublished[p.Key()] = true
				if _, err := o.store.Get(ctx, p.Key()); err != nil {
					rt.Fatalf("step %d: segment %d publishes %s, which is gone: %v", step, seg, p.Key(), err)
				}
			}
			for k := range everPublished {
				b, v, _ := commands.ParseManifestKey(k)
				seg, _ := commands.SegmentOfManifestBase(b)
				if p, _, _ := o.l.State().ManifestPointer(seg); v <= p.Version {
					if _, err := o.store.Get(ctx, k); err != nil {
						rt.Fatalf("step %d: %s (at or below segment %d's v%d) was deleted", step, k, seg, p.Version)
					}
				}
			}
		}
		steps := rapid.IntRange(1, 30).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			switch rapid.IntRange(0, 7).Draw(rt, "action") {
			case 0: // the owner writes its segment's next revision
				seg := rapid.SampledFrom(segs).Draw(rt, "write segment")
				v := int64(len(written[seg]) + 1)
				for {
					data, err := Encode(&coordpb.ManifestRevision{FormatVersion: FormatVersion, SegmentId: seg, Version: v})
					if err != nil {
						rt.Fatal(err)
					}
					if err := hs.Create(ctx, commands.ManifestKey(base(seg), v), data); err == nil {
						break
					}
					v++ // taken by a structured commit
				}
				written[seg] = append(written[seg], v)
			case 1:
				publish("inline")
			case 2: // a structured commit (may be refused: a pointer at an unreadable revision, ...)
				seg := rapid.SampledFrom(segs).Draw(rt, "commit segment")
				_, _ = commitProto(ctx, c, statsReq(seg, fmt.Sprintf("k%d", step), "f"))
			case 3:
				o.clock.Advance(rapid.SampledFrom([]time.Duration{0, 30 * time.Second, 2 * time.Minute}).Draw(rt, "advance"))
			case 4:
				_, _ = c.CollectOrphans(ctx, false)
			case 5: // a publication commits between the pass's plan and its retirement
				o.l.SetBeforeNextApply(func(body proto.Message) bool {
					if proto.MessageName(body).Name() != "RetireManifestRevisions" {
						return false
					}
					publish("before retirement")
					return true
				})
				_, _ = c.CollectOrphans(ctx, false)
				o.l.SetBeforeNextApply(nil)
			case 6: // a publication commits between the retirement and the deletions
				hs.mu.Lock()
				hs.beforeDelete = func() { publish("before delete") }
				hs.mu.Unlock()
				_, _ = c.CollectOrphans(ctx, false)
				hs.mu.Lock()
				hs.beforeDelete = nil
				hs.mu.Unlock()
			case 7: // a new leader; the old one may still run a pass later
				if deposed != nil && rapid.Bool().Draw(rt, "deposed pass") {
					old := New(staleLeader{Leader: o.l, st: deposed.st, term: deposed.term}, Config{Store: hs, Clock: o.clock, GCGrace: time.Minute})
					_, _ = old.CollectOrphans(ctx, false)
					break
				}
				deposed = &view{st: o.l.State(), term: term}
				term++
				o.l.Establish(t, term)
				c = New(o.l, Config{Store: hs, Clock: o.clock, GCGrace: time.Minute})
			}
			check(step)
		}
	})
}
