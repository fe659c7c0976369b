package commands

import (
	"errors"
	"math"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func sumsSave(logs ...*logpb.FieldLogs) *logpb.SaveBinlogPaths {
	return &logpb.SaveBinlogPaths{CollectionId: 7, Vchannel: vocab.VChannelName("p_0", 7, 0), NodeId: 1, PchannelTerm: 1, SegmentId: 1,
		Level: logpb.SegmentLevel_LEVEL_L1, Binlogs: logs}
}

func sumsLog(id, entries, size int64) *logpb.LogRef {
	return &logpb.LogRef{LogId: id, EntriesNum: entries, MemorySize: size, TimestampFrom: 1, TimestampTo: 2}
}

// D4: the sums a segment's row count and size are made of must fit an
// int64 within one save (Apply checks them with the stored logs too).
func TestValidateSaveSums(t *testing.T) {
	const m = math.MaxInt64
	delta := sumsSave(&logpb.FieldLogs{FieldId: 100, Logs: []*logpb.LogRef{sumsLog(1, 1, m)}})
	delta.Deltalogs = []*logpb.LogRef{sumsLog(2, 1, 1)}
	runValidateCases(t, []validateCase{
		// The probe's reproduction: two in-range entries_num/memory_size in two fields.
		{"sizes of two fields", sumsSave(&logpb.FieldLogs{FieldId: 100, Logs: []*logpb.LogRef{sumsLog(1, m, m)}},
			&logpb.FieldLogs{FieldId: 101, Logs: []*logpb.LogRef{sumsLog(2, m, m)}}), "sizes of the save's logs add up"},
		{"entries of one field", sumsSave(&logpb.FieldLogs{FieldId: 100, Logs: []*logpb.LogRef{sumsLog(1, m, 0), sumsLog(2, 1, 0)}}),
			"field 100: the entries of its logs add up"},
		{"a delta log's size on top", delta, "sizes of the save's logs add up"},
		{"the largest sums that fit", sumsSave(&logpb.FieldLogs{FieldId: 100, Logs: []*logpb.LogRef{sumsLog(1, m-1, m-1), sumsLog(2, 1, 1)}},
			&logpb.FieldLogs{FieldId: 101, Logs: []*logpb.LogRef{sumsLog(3, m, 0)}}), ""},
	})
}

// FuzzValidateSaveSums: a save the validator accepts has per-field entry
// sums and a total size that fit an int64, and a refusal is ErrInvalid.
func FuzzValidateSaveSums(f *testing.F) {
	f.Add(int64(math.MaxInt64), int64(1), int64(0), int64(0), int64(5))
	f.Add(int64(1), int64(2), int64(math.MaxInt64), int64(math.MaxInt64), int64(0))
	f.Add(int64(-1), int64(2), int64(3), int64(4), int64(5))
	f.Fuzz(func(t *testing.T, e1, e2, s1, s2, d int64) {
		b := sumsSave(&logpb.FieldLogs{FieldId: 100, Logs: []*logpb.LogRef{sumsLog(1, e1, s1), sumsLog(2, e2, s2)}})
		b.Deltalogs = []*logpb.LogRef{sumsLog(3, 0, d)}
		err := Validate(MustNew(b))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if e1 < 0 || e2 < 0 || s1 < 0 || s2 < 0 || d < 0 {
			t.Fatalf("accepted a negative count or size: %d %d %d %d %d", e1, e2, s1, s2, d)
		}
		if e1 > math.MaxInt64-e2 {
			t.Fatalf("accepted entries %d + %d", e1, e2)
		}
		if s1 > math.MaxInt64-s2 || s1+s2 > math.MaxInt64-d {
			t.Fatalf("accepted sizes %d + %d + %d", s1, s2, d)
		}
	})
}
