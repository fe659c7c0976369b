package manifest

import (
	"context"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
)

// The leader's check of a pointer an inline save or an import finish
// names (D5): the revision must exist and be this segment's revision of
// that version, with its keys under the segment's directories; the
// pointer the segment already holds, an unknown segment and a member
// without a store are not checked (Apply answers those).
func TestCheckNamedRevision(t *testing.T) {
	o := newOwnerFixture(t)
	ctx := context.Background()
	base := commands.ManifestBase(testColl, 1, o.seg)
	put := func(v, seg int64, files ...string) string {
		p := commands.ManifestPointer{Base: base, Version: v}
		data, err := Encode(&coordpb.ManifestRevision{FormatVersion: FormatVersion, SegmentId: seg, Version: v,
			ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{100}, Files: files}}})
		if err != nil {
			t.Fatal(err)
		}
		if err := o.store.Create(ctx, p.Key(), data); err != nil {
			t.Fatal(err)
		}
		return p.String()
	}
	good := put(1, o.seg, dataKey(o.seg, "1"))
	otherSegments := put(2, o.seg+1, dataKey(o.seg, "2"))
	foreignKeys := put(3, o.seg, "insert_log/200/1/1/100/1")
	missing := commands.ManifestPointer{Base: base, Version: 9}.String()
	st := o.l.State()
	if err := o.c.CheckNamedRevision(ctx, st, o.seg, good); err != nil {
		t.Fatalf("an existing revision: %v", err)
	}
	for name, p := range map[string]string{"missing": missing, "another segment's": otherSegments, "foreign keys": foreignKeys} {
		if err := o.c.CheckNamedRevision(ctx, st, o.seg, p); Class(err) != "invalid" {
			t.Errorf("%s revision: %v, want invalid", name, err)
		}
	}
	if err := o.c.CheckNamedRevision(ctx, st, 4242, missing); err != nil {
		t.Errorf("unknown segment: %v", err)
	}
	if res := o.inline(mustPointer(t, good)); res.Rejection != nil {
		t.Fatal(res.Rejection)
	}
	if err := New(o.l, Config{}).CheckNamedRevision(ctx, o.l.State(), o.seg, missing); err != nil {
		t.Errorf("without a store: %v", err)
	}
	if err := o.c.CheckNamedRevision(ctx, o.l.State(), o.seg, good); err != nil {
		t.Errorf("the pointer the segment holds: %v", err)
	}
}

func mustPointer(t *testing.T, s string) commands.ManifestPointer {
	t.Helper()
	p, err := commands.ParseManifestPointer(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
