package commands

import (
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// statsFiles are a W4-sized stats entry's files under segment 5 of
// collection 100, partition 1.
var statsFiles = []string{
	"stats_log/100/1/5/bf-1", "stats_log/100/1/5/bf-2", "stats_log/100/1/5/bf-3",
	"stats_log/100/1/5/bf-4", "index_files/9/1/1/5/x",
}

// Checking a commit's keys runs for every file of every revision a commit
// writes, at the leader and in every member's Apply: it allocates nothing
// when the keys are valid.
func TestObjectKeyChecksDoNotAllocate(t *testing.T) {
	for name, f := range map[string]func(){
		"ParseObjectKey+BelongsTo": func() {
			k, err := ParseObjectKey(statsFiles[0])
			if err != nil || !k.BelongsTo(100, 1, 5) {
				t.Fatalf("%v %v", k, err)
			}
		},
		"IsIndexFileOf": func() {
			k, err := ParseObjectKey(statsFiles[4])
			if err != nil || !k.IsIndexFileOf(9, 1, 5) {
				t.Fatalf("%v %v", k, err)
			}
		},
		"StatsKeyFiles": func() {
			if err := StatsKeyFiles("bloom_filter", statsFiles[:4], 100, 1, 5); err != nil {
				t.Fatal(err)
			}
		},
		"ValidateStatsKey": func() {
			if err := ValidateStatsKey("text/101"); err != nil {
				t.Fatal(err)
			}
		},
		"ValidateManifestStats": func() {
			if err := ValidateManifestStats(&logpb.ManifestStats{Key: "bloom_filter", Files: statsFiles}); err != nil {
				t.Fatal(err)
			}
		},
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %.1f allocations per run, want 0", name, n)
		}
	}
}

// The stats key's name is in the error as before.
func TestStatsKeyFilesNamesTheKey(t *testing.T) {
	err := StatsKeyFiles("bloom_filter", []string{"stats_log/100/1/6/bf"}, 100, 1, 5)
	want := `invalid command: stats key bloom_filter: object key "stats_log/100/1/6/bf" does not lie under segment 5's directories (<kind>/100/1/5/...)`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %s", err, want)
	}
	if err := StatsKeyFiles("k", []string{"a//b"}, 100, 1, 5); err == nil || err.Error() != SegmentKeys("stats key k", []string{"a//b"}, 100, 1, 5).Error() {
		t.Fatalf("error %v differs from SegmentKeys'", err)
	}
}

func BenchmarkStatsKeyFiles(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := StatsKeyFiles("bloom_filter", statsFiles[:4], 100, 1, 5); err != nil {
			b.Fatal(err)
		}
	}
}
