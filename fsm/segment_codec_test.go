package fsm

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands/logpb"
)

func genLogRef(t *rapid.T, label string) *logpb.LogRef {
	return &logpb.LogRef{LogId: rapid.Int64().Draw(t, label+".id"), EntriesNum: rapid.Int64().Draw(t, label+".n"),
		TimestampFrom: rapid.Uint64().Draw(t, label+".from"), TimestampTo: rapid.Uint64().Draw(t, label+".to"),
		MemorySize: rapid.Int64().Draw(t, label+".size")}
}

func genFieldLogs(t *rapid.T, label string) []*logpb.FieldLogs {
	var out []*logpb.FieldLogs
	for i := rapid.IntRange(0, 3).Draw(t, label+".fields"); i > 0; i-- {
		f := &logpb.FieldLogs{FieldId: rapid.Int64().Draw(t, label+".field")}
		for j := rapid.IntRange(0, 3).Draw(t, label+".logs"); j > 0; j-- {
			f.Logs = append(f.Logs, genLogRef(t, label+".log"))
		}
		out = append(out, f)
	}
	return out
}

func genPosition(t *rapid.T, label string) *logpb.WALPosition {
	if rapid.Bool().Draw(t, label+".nil") {
		return nil
	}
	return &logpb.WALPosition{Term: rapid.Int64().Draw(t, label+".term"), Offset: rapid.Uint64().Draw(t, label+".off"),
		Timestamp: rapid.Uint64().Draw(t, label+".ts")}
}

// TestSegmentCodecMatchesGenerated: the restore decoder gives exactly what
// the generated decoder (then segmentOf) gives, for any record, and refuses
// truncated input.
func TestSegmentCodecMatchesGenerated(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rec := &logpb.SegmentRecord{
			Id: rapid.Int64().Draw(t, "id"), CollectionId: rapid.Int64().Draw(t, "coll"), PartitionId: rapid.Int64().Draw(t, "part"),
			Vchannel: rapid.String().Draw(t, "vch"), Level: logpb.SegmentLevel(rapid.Int32Range(-1, 5).Draw(t, "level")),
			State: logpb.SegmentState(rapid.Int32Range(-1, 9).Draw(t, "state")), NumOfRows: rapid.Int64().Draw(t, "rows"),
			Size: rapid.Int64().Draw(t, "size"), StartPosition: genPosition(t, "start"), DmlPosition: genPosition(t, "dml"),
			SealTs: rapid.Uint64().Draw(t, "seal"), SealReason: logpb.SealReason(rapid.Int32Range(0, 8).Draw(t, "reason")),
			StorageVersion: rapid.Uint32().Draw(t, "sv"), ManifestPath: rapid.String().Draw(t, "manifest"),
			CreatedMs: rapid.Int64().Draw(t, "created"), DroppedMs: rapid.Int64().Draw(t, "dropped"),
			Binlogs: genFieldLogs(t, "binlogs"), Statslogs: genFieldLogs(t, "stats"),
			SealedMs: rapid.Int64().Draw(t, "sealed"), LastWriteMs: rapid.Int64().Draw(t, "lastwrite"),
		}
		for i := rapid.IntRange(0, 3).Draw(t, "deltas"); i > 0; i-- {
			rec.Deltalogs = append(rec.Deltalogs, genLogRef(t, "delta"))
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back logpb.SegmentRecord
		if err := proto.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		want := segmentOf(&back)
		got, err := decodeSegment(b)
		if err != nil {
			t.Fatalf("decodeSegment: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders differ:\n got %+v\nwant %+v", got, want)
		}
		if len(b) > 1 {
			cut := rapid.IntRange(1, len(b)-1).Draw(t, "cut")
			if _, err := decodeSegment(b[:cut]); err == nil && proto.Unmarshal(b[:cut], &back) != nil {
				t.Fatalf("a record cut at %d of %d bytes decoded, the generated decoder refuses it", cut, len(b))
			}
		}
	})
}
