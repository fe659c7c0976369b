package fsm

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// TestRetirementProperties applies random streams of inline publications
// (own or foreign base, any version), structured and prepared commits,
// retirements (any range, current or stale decision term), drops, prunes
// and leader changes, and checks after every entry: the invariants and
// the successor relation; two replicas and a snapshot restore agree; a
// retirement is retired only when no pointer at its base reached `from`;
// and no pointer ever moves to a version a committed retirement covered.
func TestRetirementProperties(t *testing.T) {
	start := build(t, segBase(createSeg(v0, 1, 2), createSeg(v0, 1, 2), createSeg(v0, 1, 2))...)
	rapid.Check(t, func(t *rapid.T) {
		s, replica := start, start
		condemned := map[string][][2]int64{} // base → retired ranges
		n := rapid.IntRange(1, 40).Draw(t, "steps")
		for i := 0; i < n; i++ {
			seg := rapid.Int64Range(1, 3).Draw(t, "seg")
			v := rapid.Int64Range(1, 6).Draw(t, "version")
			own := ptrAt(seg, v)
			if rapid.IntRange(0, 5).Draw(t, "foreign") == 0 {
				own = ptrAt(rapid.Int64Range(1, 4).Draw(t, "other"), v)
			}
			term := s.EstablishedTerm()
			var c commands.Command
			switch rapid.IntRange(0, 7).Draw(t, "kind") {
			case 0, 1:
				c = save(seg, int64(10+i), 1, uint64(100+i), withPointer(own))
			case 2:
				cur, _, _ := s.ManifestPointer(seg)
				c = mcommit(&logpb.ManifestPublish{SegmentId: seg, Base: cur.String(), Next: commands.ManifestPointer{Base: own.Base, Version: cur.Version + v}.String()})
			case 3:
				c = mcommit(&logpb.ManifestPublish{SegmentId: seg, Next: own.String(), Prepared: true})
			case 4, 5:
				from := rapid.Int64Range(1, 6).Draw(t, "from")
				decided := rapid.SampledFrom([]uint64{term, term, term - 1}).Draw(t, "decided")
				c = retire(decided, &logpb.ManifestRetirement{Base: own.Base, From: from, Through: from + rapid.Int64Range(0, 3).Draw(t, "span")})
			case 6:
				if rapid.Bool().Draw(t, "prune") {
					c = cmd(&logpb.PruneDroppedSegments{RetentionMs: 1, MaxCount: 3, DecisionTerm: term}, withProposedAt(1<<40))
				} else {
					c = save(seg, int64(10+i), 0, uint64(100+i), droppedSave, noBinlogs)
				}
			default:
				c = leaderEstablished(term+1, "next")
			}
			next, res, err := s.ApplyCommands(s.AppliedIndex()+1, c)
			if err != nil {
				t.Fatal(err)
			}
			if err := next.CheckInvariants(); err != nil {
				t.Fatalf("invariants after %s: %v", c.Type, err)
			}
			if err := Successor(s, next); err != nil {
				t.Fatalf("successor after %s: %v", c.Type, err)
			}
			if b, ok := c.Body.(*logpb.RetireManifestRevisions); ok && res[0].Rejection == nil {
				r := b.Retirements[0]
				if res[0].GetManifestRetired().GetRetired()[0] {
					if u := s.ManifestBaseUse(r.Base); u.Published >= r.From || u.Importing {
						t.Fatalf("retired %s %d..%d although version %d is published there", r.Base, r.From, r.Through, u.Published)
					}
					condemned[r.Base] = append(condemned[r.Base], [2]int64{r.From, r.Through})
				}
			}
			for id := int64(1); id <= 3; id++ {
				before, _, _ := s.ManifestPointer(id)
				after, _, _ := next.ManifestPointer(id)
				if after == before || after.IsZero() {
					continue
				}
				for _, rg := range condemned[after.Base] {
					if after.Version >= rg[0] && after.Version <= rg[1] {
						t.Fatalf("segment %d moved to %s, retired (%d..%d) by an earlier command", id, after.Key(), rg[0], rg[1])
					}
				}
			}
			r2, _, err := replica.ApplyCommands(replica.AppliedIndex()+1, c)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(snapshotBytes(t, next), snapshotBytes(t, r2)) {
				t.Fatalf("replicas diverged after %s", c.Type)
			}
			s, replica = next, r2
		}
		data := snapshotBytes(t, s)
		restored, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil || !bytes.Equal(snapshotBytes(t, restored), data) {
			t.Fatalf("restore: %v", err)
		}
	})
}
