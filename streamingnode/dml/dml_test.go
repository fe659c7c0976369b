package dml

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"
)

func TestInsertRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &Insert{Collection: rapid.Int64().Draw(t, "c"), Partition: rapid.Int64().Draw(t, "p"), Segment: rapid.Int64().Draw(t, "s"),
			PKs: rapid.SliceOfN(rapid.Int64(), 1, 300).Draw(t, "pks")}
		data, err := EncodeInsert(m)
		if err != nil {
			t.Fatal(err)
		}
		if !IsDML(data) {
			t.Fatal("encoded insert is not recognized as DML")
		}
		got, err := DecodeInsert(data)
		if err != nil {
			t.Fatal(err)
		}
		if got.Collection != m.Collection || got.Partition != m.Partition || got.Segment != m.Segment || len(got.PKs) != len(m.PKs) {
			t.Fatalf("decoded %+v from %+v", got, m)
		}
		for i := range m.PKs {
			if got.PKs[i] != m.PKs[i] {
				t.Fatalf("pk %d = %d, want %d", i, got.PKs[i], m.PKs[i])
			}
		}
	})
}

func TestInsertRejects(t *testing.T) {
	if _, err := EncodeInsert(&Insert{}); err == nil {
		t.Fatal("insert without rows encoded")
	}
	good, _ := EncodeInsert(&Insert{Collection: 1, Partition: 2, Segment: 3, PKs: []int64{10, 11, math.MinInt64}})
	bad := map[string][]byte{
		"not dml":   []byte("hello world, a broadcast payload"),
		"short":     good[:12],
		"truncated": good[:len(good)-2],
		"trailing":  append(append([]byte(nil), good...), 1),
	}
	kind := append([]byte(nil), good...)
	kind[4] = 9
	bad["kind"] = kind
	flip := append([]byte(nil), good...)
	flip[len(flip)-6] ^= 1
	bad["bit flip"] = flip
	for name, p := range bad {
		if _, err := DecodeInsert(p); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if IsDML([]byte("CDM")) || IsDML(nil) {
		t.Fatal("short payloads are not DML")
	}
}

func FuzzDecodeInsert(f *testing.F) {
	good, _ := EncodeInsert(&Insert{Collection: 1, Partition: 2, Segment: 3, PKs: []int64{10, 11, 12}})
	f.Add(good)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeInsert(data)
		if err != nil {
			return
		}
		again, err := EncodeInsert(m)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs: %v", err)
		}
	})
}

// The reusing forms agree with the allocating ones: EncodedSize is exact,
// AppendInsert after other bytes leaves them alone and appends the same
// payload, and DecodeInsertInto into a reused message (with spare or too
// little capacity) decodes the same rows.
func TestReuseForms(t *testing.T) {
	reused := &Insert{PKs: make([]int64, 0, 5)}
	rapid.Check(t, func(t *rapid.T) {
		m := &Insert{Collection: rapid.Int64().Draw(t, "c"), Partition: rapid.Int64().Draw(t, "p"), Segment: rapid.Int64().Draw(t, "s"),
			PKs: rapid.SliceOfN(rapid.Int64(), 1, 40).Draw(t, "pks")}
		want, err := EncodeInsert(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) != EncodedSize(m) || cap(want) != len(want) {
			t.Fatalf("EncodedSize %d, payload %d bytes (cap %d)", EncodedSize(m), len(want), cap(want))
		}
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "prefix")
		buf, err := AppendInsert(append([]byte(nil), prefix...), m)
		if err != nil || !bytes.Equal(buf[:len(prefix)], prefix) || !bytes.Equal(buf[len(prefix):], want) {
			t.Fatalf("AppendInsert after %x: %x, %v; want %x", prefix, buf, err, want)
		}
		if err := DecodeInsertInto(want, reused); err != nil {
			t.Fatal(err)
		}
		if reused.Collection != m.Collection || reused.Partition != m.Partition || reused.Segment != m.Segment || len(reused.PKs) != len(m.PKs) {
			t.Fatalf("decoded %+v from %+v", reused, m)
		}
		for i := range m.PKs {
			if reused.PKs[i] != m.PKs[i] {
				t.Fatalf("pk %d = %d, want %d", i, reused.PKs[i], m.PKs[i])
			}
		}
	})
}

func BenchmarkDecodeInsertInto(b *testing.B) {
	pks := make([]int64, 1000)
	for i := range pks {
		pks[i] = int64(1_000_000 + i)
	}
	p, _ := EncodeInsert(&Insert{Collection: 1, Segment: 2, PKs: pks})
	var m Insert
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := DecodeInsertInto(p, &m); err != nil {
			b.Fatal(err)
		}
	}
}
