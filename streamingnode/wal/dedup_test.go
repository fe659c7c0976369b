package wal

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/coordd/coordd/streamingnode/dml"
)

// insertPayload is a DML message (an Insert's rows) for the key-space tests.
func insertPayload(t *testing.T, pks ...int64) []byte {
	t.Helper()
	b, err := dml.EncodeInsert(&dml.Insert{Collection: 100, Partition: 7, Segment: 3, PKs: pks})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDedupKeySpacesAreSeparate: a DML message's ID (an Insert's dedup ID)
// and a broadcast's ID never meet, in either order, in one batch or across
// batches, across writers and after a reopen that rebuilds the index from
// the log; within its own space each still deduplicates.
func TestDedupKeySpacesAreSeparate(t *testing.T) {
	dir := t.TempDir()
	w := mustOpen(t, dir, pch, 1)
	ins := insertPayload(t, 42, 43)
	append1 := func(w *Writer, v string, payload []byte, id, ts uint64) AppendResult {
		t.Helper()
		res, err := w.Append(v, payload, id, ts)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// A writer's insert under 42 first: the broadcast 42 is still new.
	dmlRec := append1(w, vchA, ins, 42, 10)
	bc := append1(w, vchA, []byte("DropCollection"), 42, 11)
	if dmlRec.Duplicate || bc.Duplicate || bc.ID.Offset != 1 {
		t.Fatalf("insert %+v, then broadcast %+v: the broadcast was taken for a duplicate of the insert", dmlRec, bc)
	}
	// Broadcast 50 first: an insert under 50 is still new.
	bc50 := append1(w, vchA, []byte("AlterAlias"), 50, 12)
	if r := append1(w, vchA, ins, 50, 13); r.Duplicate || r.ID == bc50.ID {
		t.Fatalf("insert under broadcast 50's number: %+v", r)
	}
	// Each space still deduplicates its own repeats.
	if r := append1(w, vchA, []byte("DropCollection-retry"), 42, 14); !r.Duplicate || r.ID != bc.ID {
		t.Fatalf("broadcast retry: %+v, want a duplicate of %+v", r, bc)
	}
	if r := append1(w, vchA, insertPayload(t, 42, 43), 42, 15); !r.Duplicate || r.ID != dmlRec.ID {
		t.Fatalf("insert retry: %+v, want a duplicate of %+v", r, dmlRec)
	}
	// In one batch: a DML message and a broadcast under one ID are both written.
	p1, err := w.Enqueue(vchB, ins, 60, 20)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := w.Enqueue(vchB, []byte("DropCollection 200"), 60, 21)
	if err != nil {
		t.Fatal(err)
	}
	r1, err1 := p1.Wait()
	r2, err2 := p2.Wait()
	if err1 != nil || err2 != nil || r1.Duplicate || r2.Duplicate || r1.ID == r2.ID {
		t.Fatalf("one batch: %+v %v / %+v %v", r1, err1, r2, err2)
	}
	// Another writer at the same term indexes them by catching up.
	w2 := mustOpen(t, dir, pch, 1)
	if r := append1(w2, vchB, []byte("DropCollection 200"), 60, 22); !r.Duplicate || r.ID != r2.ID {
		t.Fatalf("second writer, broadcast 60: %+v, want %+v", r, r2)
	}
	w.Close()
	w2.Close()
	// A reopen rebuilds both spaces from the records.
	w3 := mustOpen(t, dir, pch, 2)
	defer w3.Close()
	for _, c := range []struct {
		v       string
		payload []byte
		id      uint64
		want    AppendResult
	}{{vchA, []byte("x"), 42, bc}, {vchA, ins, 42, dmlRec}, {vchA, []byte("x"), 50, bc50}, {vchB, ins, 60, r1}, {vchB, []byte("x"), 60, r2}} {
		if r := append1(w3, c.v, c.payload, c.id, 30); !r.Duplicate || r.ID != c.want.ID {
			t.Fatalf("after reopen, id %d (dml %v): %+v, want a duplicate of %+v", c.id, dml.IsDML(c.payload), r, c.want)
		}
	}
	// Readers see which field the ID belongs to.
	recs := mustReadAll(t, dir, pch, "", 0)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	for _, r := range recs {
		if dml.IsDML(r.Payload) != (r.DedupID != 0) || (r.BroadcastID != 0) == (r.DedupID != 0) {
			t.Fatalf("record %v: broadcast ID %d, dedup ID %d, DML %v", r.ID, r.BroadcastID, r.DedupID, dml.IsDML(r.Payload))
		}
	}
}

// pinnedLog is a log of two records in the on-disk format every version
// has written: broadcast 7 on the CChannel at term 2 offset 0 (payload
// "ddl"), then an Insert of pks 42, 43 with dedup ID 7 on vchA. The bytes
// are pinned: a change to them would leave existing logs unreadable.
const pinnedLog = "32000000cb3779100102000000000000000000000000000000640000000000000007000000000000000c00646d6c5f305f76636368616e64646c" +
	"5300000067e6ff640102000000000000000100000000000000650000000000000007000000000000000b00646d6c5f305f313030763043444d4c" +
	"010164000000000000000700000000000000030000000000000002540292f7133c"

// TestRecordEncodingIsPinned: records encode to the pinned bytes, and a log
// of those bytes (as an earlier version wrote it) opens with each ID in
// its key space and reads back with each ID in its field.
func TestRecordEncodingIsPinned(t *testing.T) {
	want, err := hex.DecodeString(pinnedLog)
	if err != nil {
		t.Fatal(err)
	}
	ins := insertPayload(t, 42, 43)
	got := encodeRecord(nil, &Record{ID: MessageID{2, 0}, Timestamp: 100, VChannel: cch, BroadcastID: 7, Payload: []byte("ddl")})
	got = encodeRecord(got, &Record{ID: MessageID{2, 1}, Timestamp: 101, VChannel: vchA, DedupID: 7, Payload: ins})
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding changed:\n got %x\nwant %s", got, pinnedLog)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, pch), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, pch, logName), want, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{fenceName: "2\n", lockName: ""} {
		if err := os.WriteFile(filepath.Join(dir, pch, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	recs := mustReadAll(t, dir, pch, "", 0)
	if len(recs) != 2 || recs[0].BroadcastID != 7 || recs[0].DedupID != 0 || string(recs[0].Payload) != "ddl" ||
		recs[1].DedupID != 7 || recs[1].BroadcastID != 0 || !bytes.Equal(recs[1].Payload, ins) || recs[1].Timestamp != 101 {
		t.Fatalf("pinned log reads as %+v", recs)
	}
	w := mustOpen(t, dir, pch, 3)
	defer w.Close()
	if r := mustAppend(t, w, cch, "ddl-retry", 7, 200); !r.Duplicate || r.ID != (MessageID{2, 0}) {
		t.Fatalf("broadcast 7 again: %+v", r)
	}
	if r, err := w.Append(vchA, ins, 7, 201); err != nil || !r.Duplicate || r.ID != (MessageID{2, 1}) {
		t.Fatalf("insert 7 again: %+v %v", r, err)
	}
	if r := mustAppend(t, w, vchA, "AlterAlias", 7, 202); r.Duplicate || r.ID != (MessageID{3, 2}) {
		t.Fatalf("broadcast 7 on vchA, where only an insert holds 7: %+v", r)
	}
}
