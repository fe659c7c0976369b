package wal

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	pch  = "dml_0"
	vchA = "dml_0_100v0"
	vchB = "dml_0_200v1"
	cch  = "dml_0_vcchan"
)

// TestMain doubles as a helper process for the cross-process tests: when
// WAL_TEST_HELPER is set the test binary serves a line protocol on
// stdin/stdout instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv("WAL_TEST_HELPER") == "1" {
		helperMain()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helperMain: "open DIR PCHANNEL TERM", "append VCHANNEL PAYLOAD TS BID",
// "bulk VCHANNEL N" (N appends with clock timestamps), "exit".
func helperMain() {
	in := bufio.NewScanner(os.Stdin)
	var w *Writer
	reply := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	for in.Scan() {
		f := strings.Fields(in.Text())
		switch f[0] {
		case "open":
			term, _ := strconv.ParseInt(f[3], 10, 64)
			var err error
			if w, err = Open(f[1], f[2], term); err != nil {
				reply("err %v", err)
				continue
			}
			reply("ok")
		case "append":
			ts, _ := strconv.ParseUint(f[3], 10, 64)
			bid, _ := strconv.ParseUint(f[4], 10, 64)
			res, err := w.Append(f[1], []byte(f[2]), bid, ts)
			switch {
			case errors.Is(err, ErrFenced):
				reply("fenced %v", err)
			case err != nil:
				reply("err %v", err)
			default:
				reply("ok %d %d %v", res.ID.Term, res.ID.Offset, res.Duplicate)
			}
		case "bulk":
			n, _ := strconv.Atoi(f[2])
			if err := appendClock(w, f[1], n, "helper"); err != nil {
				reply("err %v", err)
				continue
			}
			reply("ok")
		case "exit":
			if w != nil {
				w.Close()
			}
			return
		}
	}
}

// appendClock appends n records with wall-clock timestamps, retrying when
// another writer got a later timestamp in first.
func appendClock(w *Writer, vchannel string, n int, tag string) error {
	for i := 0; i < n; i++ {
		ts := uint64(time.Now().UnixNano())
		for {
			_, err := w.Append(vchannel, []byte(fmt.Sprintf("%s-%d", tag, i)), 0, ts)
			var te *TimestampError
			if errors.As(err, &te) {
				ts = max(uint64(time.Now().UnixNano()), te.Last+1)
				continue
			}
			if err != nil {
				return err
			}
			break
		}
	}
	return nil
}

type helper struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startHelper(t *testing.T) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WAL_TEST_HELPER=1", "GORACE=atexit_sleep_ms=0")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		fmt.Fprintln(in, "exit")
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return h
}

// call sends one line and returns the helper's reply.
func (h *helper) call(format string, args ...any) string {
	h.t.Helper()
	if _, err := fmt.Fprintf(h.in, format+"\n", args...); err != nil {
		h.t.Fatal(err)
	}
	if !h.out.Scan() {
		h.t.Fatalf("helper died: %v", h.out.Err())
	}
	return h.out.Text()
}

func mustOpen(t *testing.T, dir, p string, term int64) *Writer {
	t.Helper()
	w, err := Open(dir, p, term)
	if err != nil {
		t.Fatalf("Open(%s, %d): %v", p, term, err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func mustAppend(t *testing.T, w *Writer, v, payload string, bid, ts uint64) AppendResult {
	t.Helper()
	res, err := w.Append(v, []byte(payload), bid, ts)
	if err != nil {
		t.Fatalf("Append(%s, %q): %v", v, payload, err)
	}
	return res
}

func mustReadAll(t *testing.T, dir, p, v string, from uint64) []Record {
	t.Helper()
	recs, err := ReadAll(dir, p, v, from)
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	return recs
}

func payloads(recs []Record) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Payload))
	}
	return strings.Join(s, ",")
}

func TestAppendReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 2)
	in := []struct {
		v, p string
		bid  uint64
	}{{vchA, "a0", 0}, {vchB, "b0", 0}, {cch, "c0", 9}, {vchA, "a1", 0}, {vchA, "", 0}}
	for i, x := range in {
		res := mustAppend(t, w, x.v, x.p, x.bid, uint64(100+i))
		if res.ID != (MessageID{Term: 2, Offset: uint64(i)}) || res.Timestamp != uint64(100+i) || res.Duplicate {
			t.Fatalf("append %d: got %+v", i, res)
		}
	}
	if w.NextOffset() != 5 || w.LastTimestamp() != 104 {
		t.Fatalf("NextOffset %d LastTimestamp %d", w.NextOffset(), w.LastTimestamp())
	}
	all := mustReadAll(t, dir, pch, "", 0)
	if len(all) != 5 || payloads(all) != "a0,b0,c0,a1," {
		t.Fatalf("all: %q", payloads(all))
	}
	c := all[2]
	if c.VChannel != cch || c.BroadcastID != 9 || c.Timestamp != 102 || c.ID != (MessageID{2, 2}) {
		t.Fatalf("record 2: %+v", c)
	}
	if got := payloads(mustReadAll(t, dir, pch, vchA, 0)); got != "a0,a1," {
		t.Fatalf("vchA: %q", got)
	}
	if got := mustReadAll(t, dir, pch, vchA, 1); len(got) != 2 || got[0].ID.Offset != 3 {
		t.Fatalf("vchA from 1: %+v", got)
	}
	if got := mustReadAll(t, dir, pch, cch, 0); len(got) != 1 || got[0].VChannel != cch {
		t.Fatalf("cchannel: %+v", got)
	}
	if got := mustReadAll(t, dir, "dml_9", "", 0); len(got) != 0 {
		t.Fatalf("missing pchannel: %+v", got)
	}
	if f, err := ReadFence(dir, pch); err != nil || f != 2 {
		t.Fatalf("fence %d %v", f, err)
	}
}

func TestAppendValidation(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	for _, v := range []string{"", "dml_1_100v0", "other"} {
		if _, err := w.Append(v, nil, 0, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("vchannel %q: %v", v, err)
		}
	}
	if _, err := w.Append(vchA, make([]byte, MaxPayloadBytes+1), 0, 1); !errors.Is(err, ErrInvalid) {
		t.Errorf("big payload: %v", err)
	}
	for _, p := range []string{"", "..", ".x", "a/b", "a\\b"} {
		if _, err := Open(dir, p, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("pchannel %q: %v", p, err)
		}
	}
	if _, err := Open(dir, pch, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("term 0: %v", err)
	}
	mustAppend(t, w, vchA, "x", 0, 10)
	_, err := w.Append(vchA, []byte("y"), 0, 10)
	var te *TimestampError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimestampRegression) || te.Last != 10 {
		t.Fatalf("timestamp regression: %v", err)
	}
	w.Close()
	if _, err := w.Append(vchA, nil, 0, 11); !errors.Is(err, ErrClosed) {
		t.Fatalf("after close: %v", err)
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	for i := 0; i < 3; i++ {
		mustAppend(t, w, vchA, fmt.Sprint(i), 0, uint64(10+i))
	}
	w.Close()
	w = mustOpen(t, dir, pch, 1)
	if w.NextOffset() != 3 || w.LastTimestamp() != 12 || w.TruncatedBytes() != 0 {
		t.Fatalf("reopen: next %d ts %d truncated %d", w.NextOffset(), w.LastTimestamp(), w.TruncatedBytes())
	}
	if res := mustAppend(t, w, vchA, "3", 0, 13); res.ID != (MessageID{1, 3}) {
		t.Fatalf("append after reopen: %+v", res)
	}
	w.Close()
	w = mustOpen(t, dir, pch, 5)
	if res := mustAppend(t, w, vchB, "4", 0, 14); res.ID != (MessageID{5, 4}) {
		t.Fatalf("append at higher term: %+v", res)
	}
	recs := mustReadAll(t, dir, pch, "", 0)
	if payloads(recs) != "0,1,2,3,4" || recs[3].ID.Term != 1 || recs[4].ID.Term != 5 {
		t.Fatalf("records: %+v", recs)
	}
}

func logPath(dir string) string { return filepath.Join(dir, pch, logName) }

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func TestTornTailTruncated(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	for i := 0; i < 3; i++ {
		mustAppend(t, w, vchA, fmt.Sprintf("payload-%d", i), 0, uint64(10+i))
	}
	w.Close()
	full := fileSize(t, logPath(dir))
	if err := os.Truncate(logPath(dir), full-5); err != nil {
		t.Fatal(err)
	}
	// A reader stops before the torn record without touching it.
	if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "payload-0,payload-1" {
		t.Fatalf("read with torn tail: %q", got)
	}
	if fileSize(t, logPath(dir)) != full-5 {
		t.Fatal("reader changed the file")
	}
	w = mustOpen(t, dir, pch, 1)
	if w.NextOffset() != 2 || w.TruncatedBytes() == 0 || w.LastTimestamp() != 11 {
		t.Fatalf("after torn tail: next %d truncated %d ts %d", w.NextOffset(), w.TruncatedBytes(), w.LastTimestamp())
	}
	if res := mustAppend(t, w, vchA, "payload-2b", 0, 20); res.ID.Offset != 2 {
		t.Fatalf("append after truncation: %+v", res)
	}
	w.Close()

	// Zeros at the end (a file extended but never written before a crash).
	f, err := os.OpenFile(logPath(dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 3000))
	f.Close()
	w = mustOpen(t, dir, pch, 1)
	if w.NextOffset() != 3 || w.TruncatedBytes() != 3000 {
		t.Fatalf("zero tail: next %d truncated %d", w.NextOffset(), w.TruncatedBytes())
	}
	mustAppend(t, w, vchA, "payload-3", 0, 21)
	if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "payload-0,payload-1,payload-2b,payload-3" {
		t.Fatalf("final: %q", got)
	}
}

func TestTornTailTruncatedByCatchUp(t *testing.T) {
	// A writer that died mid-append leaves a torn tail; a live writer at the
	// same term truncates it on its next append.
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	mustAppend(t, w, vchA, "one", 0, 1)
	var rec Record
	rec.ID, rec.Timestamp, rec.VChannel, rec.Payload = MessageID{1, 1}, 2, vchA, []byte("half-written")
	buf := encodeRecord(nil, &rec)
	f, _ := os.OpenFile(logPath(dir), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(buf[:len(buf)-4])
	f.Close()
	if res := mustAppend(t, w, vchA, "two", 0, 3); res.ID.Offset != 1 {
		t.Fatalf("append: %+v", res)
	}
	if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "one,two" {
		t.Fatalf("records: %q", got)
	}
}

func TestCorruptionDetected(t *testing.T) {
	build := func(t *testing.T) (string, []int64) {
		dir := t.TempDir()
		w := mustOpen(t, dir, pch, 1)
		var ends []int64
		for i := 0; i < 3; i++ {
			mustAppend(t, w, vchA, fmt.Sprintf("payload-%d", i), 0, uint64(10+i))
			ends = append(ends, fileSize(t, logPath(dir)))
		}
		w.Close()
		return dir, ends
	}
	flip := func(t *testing.T, path string, at int64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 1)
		f.ReadAt(b, at)
		b[0] ^= 0x40
		f.WriteAt(b, at)
	}
	t.Run("middle", func(t *testing.T) {
		dir, ends := build(t)
		flip(t, logPath(dir), ends[1]-3) // inside record 1's payload
		if _, err := Open(dir, pch, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v", err)
		}
		recs, err := ReadAll(dir, pch, "", 0)
		if !errors.Is(err, ErrCorrupt) || len(recs) != 1 {
			t.Fatalf("ReadAll: %d records, %v", len(recs), err)
		}
	})
	t.Run("last", func(t *testing.T) {
		// A checksum failure in the final record without a zero sector is
		// damage, not a torn write.
		dir, ends := build(t)
		flip(t, logPath(dir), ends[2]-3)
		if _, err := Open(dir, pch, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v", err)
		}
		if _, err := ReadAll(dir, pch, "", 0); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ReadAll: %v", err)
		}
	})
	t.Run("length", func(t *testing.T) {
		dir, ends := build(t)
		flip(t, logPath(dir), ends[0]+3) // high byte of record 1's length
		if _, err := Open(dir, pch, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("fence", func(t *testing.T) {
		dir, _ := build(t)
		os.WriteFile(filepath.Join(dir, pch, fenceName), []byte("x1\n"), 0o644)
		if _, err := Open(dir, pch, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("zero sector in last record is torn", func(t *testing.T) {
		dir := t.TempDir()
		w := mustOpen(t, dir, pch, 1)
		mustAppend(t, w, vchA, "small", 0, 1)
		mustAppend(t, w, vchA, strings.Repeat("x", 2000), 0, 2)
		w.Close()
		// Zero one sector-aligned block inside the last record.
		f, _ := os.OpenFile(logPath(dir), os.O_RDWR, 0)
		f.WriteAt(make([]byte, sectorSize), sectorSize*2)
		f.Close()
		w = mustOpen(t, dir, pch, 1)
		if w.NextOffset() != 1 || w.TruncatedBytes() == 0 {
			t.Fatalf("next %d truncated %d", w.NextOffset(), w.TruncatedBytes())
		}
	})
}

func TestFencingSameProcess(t *testing.T) {
	dir := t.TempDir()
	old := mustOpen(t, dir, pch, 2)
	mustAppend(t, old, vchA, "old-0", 0, 1)
	// The old writer still believes it owns the channel.
	nw := mustOpen(t, dir, pch, 3)
	_, err := old.Append(vchA, []byte("old-1"), 0, 2)
	var fe *FencedError
	if !errors.As(err, &fe) || !errors.Is(err, ErrFenced) || fe.Fence != 3 || fe.Term != 2 {
		t.Fatalf("old append: %v", err)
	}
	if want := "fenced: pchannel dml_0 is at term 3, this writer holds term 2"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
	// Even a dedup hit is refused once fenced.
	if _, err := old.Append(vchA, []byte("old-2"), 77, 3); !errors.Is(err, ErrFenced) {
		t.Fatalf("old dedup append: %v", err)
	}
	if res := mustAppend(t, nw, vchA, "new-1", 0, 4); res.ID != (MessageID{3, 1}) {
		t.Fatalf("new append: %+v", res)
	}
	if _, err := Open(dir, pch, 2); !errors.Is(err, ErrFenced) {
		t.Fatalf("reopen at old term: %v", err)
	}
	if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "old-0,new-1" {
		t.Fatalf("records: %q", got)
	}
	if f, _ := ReadFence(dir, pch); f != 3 {
		t.Fatalf("fence %d", f)
	}
}

func TestFencingAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	t.Run("helper is fenced by us", func(t *testing.T) {
		h := startHelper(t)
		if r := h.call("open %s %s 2", dir, pch); r != "ok" {
			t.Fatalf("helper open: %s", r)
		}
		if r := h.call("append %s helper-0 1 0", vchA); r != "ok 2 0 false" {
			t.Fatalf("helper append: %s", r)
		}
		nw := mustOpen(t, dir, pch, 3)
		r := h.call("append %s helper-1 2 0", vchA)
		if !strings.HasPrefix(r, "fenced fenced: pchannel dml_0 is at term 3, this writer holds term 2") {
			t.Fatalf("helper append after fence: %s", r)
		}
		mustAppend(t, nw, vchA, "parent-1", 0, 3)
		if r := h.call("open %s %s 2", dir, pch); !strings.HasPrefix(r, "err fenced") {
			t.Fatalf("helper reopen at old term: %s", r)
		}
		if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "helper-0,parent-1" {
			t.Fatalf("records: %q", got)
		}
		nw.Close()
	})
	t.Run("we are fenced by helper", func(t *testing.T) {
		h := startHelper(t)
		old := mustOpen(t, dir, pch, 3)
		mustAppend(t, old, vchA, "parent-2", 0, 4)
		if r := h.call("open %s %s 4", dir, pch); r != "ok" {
			t.Fatalf("helper open: %s", r)
		}
		if _, err := old.Append(vchA, []byte("parent-3"), 0, 5); !errors.Is(err, ErrFenced) {
			t.Fatalf("old append: %v", err)
		}
		if r := h.call("append %s helper-3 6 0", vchA); r != "ok 4 3 false" {
			t.Fatalf("helper append: %s", r)
		}
		if got := payloads(mustReadAll(t, dir, pch, "", 0)); got != "helper-0,parent-1,parent-2,helper-3" {
			t.Fatalf("records: %q", got)
		}
	})
}

func TestDedup(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	first := mustAppend(t, w, cch, "ddl", 42, 10)
	again := mustAppend(t, w, cch, "ddl-retry", 42, 11)
	if !again.Duplicate || again.ID != first.ID || again.Timestamp != 10 {
		t.Fatalf("retry: %+v (first %+v)", again, first)
	}
	other := mustAppend(t, w, vchA, "ddl", 42, 12)
	if other.Duplicate || other.ID.Offset != 1 {
		t.Fatalf("same broadcast, other vchannel: %+v", other)
	}
	if r := mustAppend(t, w, vchA, "plain", 0, 13); r.Duplicate {
		t.Fatal("broadcast id 0 deduplicated")
	}
	if r := mustAppend(t, w, vchA, "plain", 0, 14); r.Duplicate || r.ID.Offset != 3 {
		t.Fatalf("broadcast id 0 twice: %+v", r)
	}
	// A second writer at the same term sees w's records on its next append;
	// a reopen rebuilds the index from the log.
	w2 := mustOpen(t, dir, pch, 1)
	mustAppend(t, w, vchB, "late", 43, 15)
	if r := mustAppend(t, w2, vchB, "late-retry", 43, 16); !r.Duplicate || r.ID.Offset != 4 {
		t.Fatalf("cross-writer dedup: %+v", r)
	}
	w.Close()
	w2.Close()
	w3 := mustOpen(t, dir, pch, 2)
	if r := mustAppend(t, w3, cch, "ddl-again", 42, 20); !r.Duplicate || r.ID != first.ID {
		t.Fatalf("dedup after reopen: %+v", r)
	}
	if n := len(mustReadAll(t, dir, pch, "", 0)); n != 5 {
		t.Fatalf("%d records", n)
	}
}

func checkDense(t *testing.T, recs []Record, want int) {
	t.Helper()
	if len(recs) != want {
		t.Fatalf("%d records, want %d", len(recs), want)
	}
	for i, r := range recs {
		if r.ID.Offset != uint64(i) {
			t.Fatalf("record %d has offset %d", i, r.ID.Offset)
		}
		if i > 0 && r.Timestamp <= recs[i-1].Timestamp {
			t.Fatalf("timestamp %d at %d after %d", r.Timestamp, i, recs[i-1].Timestamp)
		}
	}
}

func TestConcurrentWritersSameTerm(t *testing.T) {
	t.Run("in process", func(t *testing.T) {
		dir := t.TempDir()
		writers := []*Writer{mustOpen(t, dir, pch, 1), mustOpen(t, dir, pch, 1)}
		var ts atomic.Uint64
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				w := writers[g%2]
				for i := 0; i < 25; i++ {
					for {
						_, err := w.Append(vchA, []byte(fmt.Sprintf("g%d-%d", g, i)), uint64(g*1000+i+1), ts.Add(1))
						if errors.Is(err, ErrTimestampRegression) {
							continue
						}
						if err != nil {
							errs <- err
							return
						}
						break
					}
				}
			}(g)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		checkDense(t, mustReadAll(t, dir, pch, "", 0), 200)
	})
	t.Run("across processes", func(t *testing.T) {
		dir := t.TempDir()
		h := startHelper(t)
		if r := h.call("open %s %s 1", dir, pch); r != "ok" {
			t.Fatalf("helper open: %s", r)
		}
		w := mustOpen(t, dir, pch, 1)
		done := make(chan string, 1)
		go func() { done <- h.call("bulk %s 100", vchB) }()
		if err := appendClock(w, vchA, 100, "parent"); err != nil {
			t.Fatal(err)
		}
		if r := <-done; r != "ok" {
			t.Fatalf("helper bulk: %s", r)
		}
		recs := mustReadAll(t, dir, pch, "", 0)
		checkDense(t, recs, 200)
		if n := len(mustReadAll(t, dir, pch, vchB, 0)); n != 100 {
			t.Fatalf("%d helper records", n)
		}
	})
}

func TestReaderFollow(t *testing.T) {
	dir := t.TempDir()
	// The reader starts before the log exists.
	r, err := NewReader(dir, pch, ReaderOptions{VChannel: vchA, From: 1, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := make(chan Record, 16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		for {
			rec, err := r.Next(ctx)
			if err != nil {
				errc <- err
				return
			}
			got <- rec
		}
	}()
	w := mustOpen(t, dir, pch, 1)
	mustAppend(t, w, vchA, "a0", 0, 1) // offset 0: before From
	mustAppend(t, w, vchB, "b0", 0, 2)
	mustAppend(t, w, vchA, "a1", 0, 3)
	select {
	case rec := <-got:
		if string(rec.Payload) != "a1" || rec.ID.Offset != 2 {
			t.Fatalf("first followed record: %+v", rec)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader did not see the append")
	}
	mustAppend(t, w, vchA, "a2", 0, 4)
	select {
	case rec := <-got:
		if string(rec.Payload) != "a2" {
			t.Fatalf("second followed record: %+v", rec)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader did not see the second append")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reader did not stop")
	}
}

// TestUnsafeSkipFenceIsCaughtByReaders: a writer broken on purpose
// (UnsafeSkipFence, tests of the tests only) writes past the fence; every
// reader then reports the log's term going back as a TermRegression.
func TestUnsafeSkipFenceIsCaughtByReaders(t *testing.T) {
	dir := t.TempDir()
	old := mustOpen(t, dir, pch, 2)
	old.UnsafeSkipFence()
	mustAppend(t, old, vchA, "old-0", 0, 1)
	nw := mustOpen(t, dir, pch, 3)
	mustAppend(t, nw, vchA, "new-0", 0, 2)
	if _, err := old.Append(vchA, []byte("old-1"), 0, 3); err != nil {
		t.Fatalf("the broken writer was refused: %v", err)
	}
	recs, err := ReadAll(dir, pch, "", 0)
	var ce *CorruptError
	if !errors.As(err, &ce) || !ce.TermRegression || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read after a write past the fence: %v", err)
	}
	if got := payloads(recs); got != "old-0,new-0" {
		t.Fatalf("records before the regression: %q", got)
	}
}
