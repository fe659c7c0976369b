package main

import (
	"encoding/json"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
)

// TestSegmentGetJSONAlwaysHasBinlogPaths: 'segment get -o json' prints
// binlog_paths even for a segment without binlogs (as []), and derives the
// object keys from log IDs when the server lists none.
func TestSegmentGetJSONAlwaysHasBinlogPaths(t *testing.T) {
	for _, tc := range []struct {
		name string
		seg  *coordpb.SegmentInfo
		want []string
	}{
		{"growing, no binlogs", &coordpb.SegmentInfo{SegmentId: 7, CollectionId: 5, State: "Growing"}, []string{}},
		{"listed by the server", &coordpb.SegmentInfo{SegmentId: 7, CollectionId: 5, BinlogPaths: []string{"insert_log/5/0/7/100/9"}},
			[]string{"insert_log/5/0/7/100/9"}},
		{"derived from log IDs", &coordpb.SegmentInfo{SegmentId: 7, CollectionId: 5, PartitionId: 2,
			FieldBinlogs: []*coordpb.FieldBinlog{{FieldId: 100, Binlogs: []*coordpb.Binlog{{LogId: 11}}}}},
			[]string{"insert_log/5/2/7/100/11"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(toSegmentGetJSON(tc.seg))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			raw, ok := got["binlog_paths"]
			if !ok {
				t.Fatalf("no binlog_paths in %s", b)
			}
			var paths []string
			if err := json.Unmarshal(raw, &paths); err != nil || paths == nil || len(paths) != len(tc.want) {
				t.Fatalf("binlog_paths %s, want %q", raw, tc.want)
			}
			for i := range paths {
				if paths[i] != tc.want[i] {
					t.Fatalf("binlog_paths %q, want %q", paths, tc.want)
				}
			}
			for _, k := range []string{"segment_id", "collection_id", "vchannel", "level", "state", "row_count", "start_position", "dml_position"} {
				if _, ok := got[k]; !ok {
					t.Fatalf("no %s in %s", k, b)
				}
			}
		})
	}
}
