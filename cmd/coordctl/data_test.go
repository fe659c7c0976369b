package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/binlog"
)

// TestWritePathBadInput: the write-path commands refuse malformed command
// lines with exit 2 and one line on stderr, before sending anything.
func TestWritePathBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"insert"}, "insert: want COLLECTION_ID ROWS, got 0"},
		{[]string{"insert", "5"}, "want COLLECTION_ID ROWS, got 1"},
		{[]string{"insert", "5", "10", "3"}, "want COLLECTION_ID ROWS, got 3"},
		{[]string{"insert", "0", "10"}, "COLLECTION_ID must be a positive integer"},
		{[]string{"insert", "x", "10"}, "COLLECTION_ID must be a positive integer"},
		{[]string{"insert", "5", "0"}, "ROWS must be an integer in 1..65536"},
		{[]string{"insert", "5", "65537"}, "ROWS must be an integer"},
		{[]string{"insert", "5", "-1"}, "ROWS must be an integer"},
		{[]string{"insert", "5", "10", "--partition", "-1"}, "--partition must not be negative"},
		{[]string{"insert", "5", "10", "--batch", "0"}, "--batch must be in"},
		{[]string{"insert", "5", "10", "--wait"}, "flag provided but not defined: -wait"},
		{[]string{"flush"}, "flush: want COLLECTION_ID, got 0"},
		{[]string{"flush", "1", "2"}, "want COLLECTION_ID, got 2"},
		{[]string{"flush", "-3"}, "COLLECTION_ID must be a positive integer"},
		{[]string{"flush", "1", "--wait=maybe"}, "invalid boolean value"},
		{[]string{"flush", "1", "--wait", "--wait-timeout", "0s"}, "--wait-timeout and --interval must be positive"},
		{[]string{"segment"}, "segment: missing command"},
		{[]string{"segment", "drop", "1"}, `segment: unknown command "drop"`},
		{[]string{"segment", "list", "x"}, "segment list: want no arguments"},
		{[]string{"segment", "list", "--state", "Frozen"}, `--state "Frozen": want one of Growing, Sealed`},
		{[]string{"segment", "list", "--collection", "-1"}, "--collection must be a positive integer"},
		{[]string{"segment", "list", "--vchannel", "dml_0"}, "is not a VChannel name"},
		{[]string{"segment", "get"}, "segment get: want SEGMENT_ID, got 0"},
		{[]string{"segment", "get", "1", "2"}, "want SEGMENT_ID, got 2"},
		{[]string{"segment", "get", "0"}, "SEGMENT_ID must be a positive integer"},
		{[]string{"segment", "get", "abc"}, "SEGMENT_ID must be a positive integer"},
		{[]string{"checkpoint"}, "checkpoint: missing command"},
		{[]string{"checkpoint", "list", "v"}, "checkpoint list: want no arguments"},
		{[]string{"checkpoint", "list", "--collection", "-2"}, "--collection must be a positive integer"},
		{[]string{"recovery-info"}, "recovery-info: want VCHANNEL, got 0"},
		{[]string{"recovery-info", "a", "b"}, "want VCHANNEL, got 2"},
		{[]string{"recovery-info", "dml_0"}, `"dml_0" is not a VChannel name`},
		{[]string{"recovery-info", "nonsense"}, "is not a VChannel name"},
		{[]string{"binlog"}, "binlog: missing command"},
		{[]string{"binlog", "dump"}, "binlog dump: want at least one PATH"},
		{[]string{"binlog", "dump", "insert_log/1/2/3"}, `PATH "insert_log/1/2/3"`},
		{[]string{"binlog", "dump", "insert_log/1/0/3/100/7", "../etc/passwd"}, `PATH "../etc/passwd"`},
		{[]string{"binlog", "dump", "--object-store", "", "insert_log/1/0/3/100/7"}, "--object-store is required"},
		// Review D1: no silent default store (it read another cluster's
		// objects under the same key).
		{[]string{"binlog", "dump", "insert_log/1/0/3/100/7"}, "binlog dump: --object-store is required: the object store the streaming nodes write binlogs to"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, &stdout, &stderr, noEnv)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d (stderr %q)", code, exitUsage, stderr.String())
			}
			line := stderr.String()
			if strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "coordctl: ") || !strings.Contains(line, tc.want) {
				t.Fatalf("stderr %q: want one line mentioning %q", line, tc.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

func TestWritePathHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "insert COLLECTION_ID ROWS"},
		{[]string{"help"}, "binlog dump --object-store URL PATH..."},
		{[]string{"insert", "--help"}, "--partition ID"},
		// Review D8: the deadline insert really uses, and what a failure
		// leaves behind (D7), are in its help.
		{[]string{"insert", "--help"}, "Deadline: --timeout plus 1s per 1,000 rows"},
		{[]string{"insert", "--help"}, "Not atomic: rows go to each VChannel separately"},
		{[]string{"insert", "--help"}, "'insert'\n                             waits --timeout plus 1s per 1,000 rows"},
		{[]string{"flush", "--help"}, "each poll is one request, bounded by --timeout"},
		{[]string{"help", "flush"}, "--wait"},
		{[]string{"recovery-info", "-h"}, "seek position"},
		{[]string{"segment", "list", "--help"}, "--state STATE"},
		{[]string{"binlog", "dump", "--help"}, "--object-store URL"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), tc.args, &stdout, &stderr, noEnv); code != exitOK {
			t.Fatalf("%v: exit %d, stderr %q", tc.args, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), tc.want) {
			t.Fatalf("%v: stdout %q lacks %q", tc.args, stdout.String(), tc.want)
		}
	}
}

// binlog dump reads objects straight from the store: rows as JSON lines;
// a missing or damaged object fails the request (exit 1).
func TestBinlogDump(t *testing.T) {
	dir := t.TempDir()
	obj := &binlog.Object{ID: binlog.ID{Collection: 1, Partition: 0, Segment: 3, Field: binlog.PKFieldID, LogID: 7},
		Rows: []binlog.Row{{PK: 10, TS: 100}, {PK: 11, TS: 101}}}
	data, _ := binlog.Encode(obj)
	path := filepath.Join(dir, filepath.FromSlash(obj.ID.Path()))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"binlog", "dump", "--object-store", dir, obj.ID.Path()}, &stdout, &stderr, noEnv); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("output %q", stdout.String())
	}
	for i, l := range lines {
		var r binlog.Row
		if err := json.Unmarshal([]byte(l), &r); err != nil || r != obj.Rows[i] || !strings.Contains(l, `"pk":`) || !strings.Contains(l, `"ts":`) {
			t.Fatalf("line %q: %+v, %v", l, r, err)
		}
	}
	// Missing object, damaged object, object under the wrong key: exit 1.
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "8"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "9"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"insert_log/1/0/3/100/99", "insert_log/1/0/3/100/8", "insert_log/1/0/3/100/9"} {
		stdout.Reset()
		stderr.Reset()
		if code := run(context.Background(), []string{"binlog", "dump", "--object-store", dir, p}, &stdout, &stderr, noEnv); code != exitFail {
			t.Fatalf("%s: exit %d (stderr %q)", p, code, stderr.String())
		}
	}
}

func TestInsertDeadline(t *testing.T) {
	for _, tc := range []struct {
		rows uint64
		want time.Duration
	}{{1, 5 * time.Second}, {999, 5 * time.Second}, {5000, 10 * time.Second}, {10000, 15 * time.Second}, {65536, 70 * time.Second}} {
		if got := insertDeadline(5*time.Second, tc.rows); got != tc.want {
			t.Errorf("insertDeadline(5s, %d) = %v, want %v", tc.rows, got, tc.want)
		}
	}
}

func TestProgressLine(t *testing.T) {
	st := &coordpb.GetFlushStateResponse{SegmentsTotal: 3, SegmentsFlushed: 1, VchannelsTotal: 2, Behind: []*coordpb.FlushLag{
		{Kind: "vchannel", Vchannel: "a_1v0", State: "behind", LagMs: 40},
		{Kind: "vchannel", Vchannel: "a_1v1", State: "behind", LagMs: 90},
		{Kind: "segment", SegmentId: 7, State: "Flushing"},
	}}
	if got, want := progressLine(st), "segments flushed 1/3, vchannels caught up 0/2, slowest vchannel a_1v1 (behind) lag 90ms, segment 7 Flushing"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	st.Behind = append(st.Behind, &coordpb.FlushLag{Kind: "vchannel", Vchannel: "a_1v2", State: "none", LagMs: 1 << 40})
	if got := progressLine(st); !strings.Contains(got, "slowest vchannel a_1v2 has no checkpoint yet") {
		t.Fatalf("%q", got)
	}
	st = &coordpb.GetFlushStateResponse{Flushed: true, SegmentsTotal: 3, SegmentsFlushed: 3, VchannelsTotal: 2, VchannelsFlushed: 2}
	if got := progressLine(st); got != "segments flushed 3/3, vchannels caught up 2/2: flushed" {
		t.Fatalf("%q", got)
	}
}
