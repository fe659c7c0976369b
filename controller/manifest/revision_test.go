package manifest

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

func sampleRevision() *coordpb.ManifestRevision {
	return &coordpb.ManifestRevision{FormatVersion: FormatVersion, SegmentId: 7, Version: 3,
		ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{0, 1, 100}, Files: []string{"d/0", "d/1"}}, {FieldIds: []int64{101}, Files: []string{"v/0"}}},
		DeltaLogs:    []string{"delta/0"},
		Stats:        []*coordpb.ManifestStatsEntry{{Key: "bloom", Files: []string{"s/0"}}},
		Indexes:      []*coordpb.ManifestIndexEntry{{BuildId: 9, IndexId: 8, FieldId: 101, Files: []string{"i/0"}, SerializedSize: 10}}}
}

func TestRevisionRoundTripAndRefusals(t *testing.T) {
	data, err := Encode(sampleRevision())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil || !proto.Equal(got, sampleRevision()) {
		t.Fatalf("round trip: %v %v", got, err)
	}
	again, _ := Encode(got)
	if !bytes.Equal(again, data) {
		t.Fatal("encoding is not deterministic")
	}
	flip := func(i int) []byte { b := bytes.Clone(data); b[i] ^= 1; return b }
	for name, bad := range map[string][]byte{
		"empty": nil, "magic": flip(0), "format version": flip(7), "checksum": flip(9), "body": flip(len(data) - 1),
		"truncated": data[:len(data)-1], "trailing": append(bytes.Clone(data), 0),
	} {
		if _, err := Decode(bad); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	bad := sampleRevision()
	bad.ColumnGroups[1].FieldIds = []int64{100} // a field in two groups
	if _, err := Encode(bad); err == nil {
		t.Error("encoded a revision with a field in two groups")
	}
}

func TestMutateAppendDropsIndexesOnTouchedFields(t *testing.T) {
	cur := sampleRevision()
	next, err := Mutate(cur, 7, 4, &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AppendData{AppendData: &coordpb.AppendData{
		ColumnGroups: []*coordpb.ManifestColumnGroup{{FieldIds: []int64{101}, Files: []string{"v/1"}}}, DeltaLogs: []string{"delta/1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Indexes) != 0 || len(next.ColumnGroups[1].Files) != 2 || len(next.DeltaLogs) != 2 || next.Version != 4 {
		t.Fatalf("append: %v", next)
	}
	if !proto.Equal(cur, sampleRevision()) {
		t.Fatal("Mutate changed its input")
	}
	if _, err := Mutate(cur, 7, 4, &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_Create{Create: &coordpb.CreateManifest{}}}); err == nil {
		t.Fatal("create over an existing revision")
	}
}

// FuzzDecode: the revision reader never panics, and whatever it accepts
// re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	data, _ := Encode(sampleRevision())
	f.Add(data)
	f.Add([]byte("CDMANIF\x01\x00\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(r)
		if err != nil {
			t.Fatalf("accepted revision does not re-encode: %v", err)
		}
		r2, err := Decode(again)
		if err != nil || !proto.Equal(r, r2) {
			t.Fatalf("re-encoded revision decodes differently: %v", err)
		}
	})
}
