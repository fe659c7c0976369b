package binlog

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"pgregory.net/rapid"
)

func sample() *Object {
	return &Object{ID: ID{Collection: 7, Partition: 1, Segment: 42, Field: PKFieldID, LogID: 99},
		Rows: []Row{{PK: 5, TS: 100}, {PK: 6, TS: 100}, {PK: -3, TS: 120}, {PK: math.MaxInt64, TS: math.MaxUint64}, {PK: math.MinInt64, TS: 0}}}
}

func TestRoundTrip(t *testing.T) {
	o := sample()
	data, err := Encode(o)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != o.ID || len(got.Rows) != len(o.Rows) {
		t.Fatalf("decoded %+v", got)
	}
	for i := range o.Rows {
		if got.Rows[i] != o.Rows[i] {
			t.Fatalf("row %d = %+v, want %+v", i, got.Rows[i], o.Rows[i])
		}
	}
	if from, to := got.TimestampRange(); from != 0 || to != math.MaxUint64 {
		t.Fatalf("range %d..%d", from, to)
	}
}

func TestRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		o := &Object{ID: ID{rapid.Int64().Draw(t, "c"), rapid.Int64().Draw(t, "p"), rapid.Int64().Draw(t, "s"),
			rapid.Int64().Draw(t, "f"), rapid.Int64().Draw(t, "l")}}
		n := rapid.IntRange(0, 200).Draw(t, "n")
		for i := 0; i < n; i++ {
			o.Rows = append(o.Rows, Row{PK: rapid.Int64().Draw(t, "pk"), TS: rapid.Uint64().Draw(t, "ts")})
		}
		data, err := Encode(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != o.ID || len(got.Rows) != n {
			t.Fatalf("decoded %+v", got)
		}
		for i := range o.Rows {
			if got.Rows[i] != o.Rows[i] {
				t.Fatalf("row %d = %+v, want %+v", i, got.Rows[i], o.Rows[i])
			}
		}
	})
}

// Contiguous primary keys written in time order cost about two bytes a
// row plus the timestamp deltas.
func TestCompact(t *testing.T) {
	o := &Object{ID: ID{1, 1, 1, PKFieldID, 1}}
	for i := 0; i < 10000; i++ {
		o.Rows = append(o.Rows, Row{PK: int64(1_000_000 + i), TS: 460_000_000_000_000_000 + uint64(i/100)})
	}
	data, _ := Encode(o)
	if len(data) > 2*10000+100 {
		t.Fatalf("%d bytes for 10000 contiguous rows", len(data))
	}
}

func TestDecodeRejectsDamage(t *testing.T) {
	good, _ := Encode(sample())
	cases := map[string][]byte{
		"empty":     nil,
		"short":     good[:10],
		"truncated": good[:len(good)-1],
		"magic":     append([]byte("XDBL"), good[4:]...),
		"trailing":  append(append([]byte(nil), good...), 0),
	}
	flip := append([]byte(nil), good...)
	flip[headerSize+3] ^= 0x40
	cases["bit flip"] = flip
	ver := append([]byte(nil), good...)
	ver[4] = 2
	cases["version"] = ver
	for name, data := range cases {
		if _, err := Decode(data); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestPath(t *testing.T) {
	id := ID{Collection: 7, Partition: 1, Segment: 42, Field: 100, LogID: 9001}
	if p := id.Path(); p != "insert_log/7/1/42/100/9001" {
		t.Fatal(p)
	}
	got, err := ParsePath(id.Path())
	if err != nil || got != id {
		t.Fatalf("ParsePath = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "insert_log/1/2/3/4", "stats_log/1/2/3/4/5", "insert_log/1/2/3/4/5/6", "insert_log/1/2/x/4/5",
		"insert_log/01/2/3/4/5", "insert_log/+1/2/3/4/5", "/insert_log/1/2/3/4/5"} {
		if _, err := ParsePath(bad); !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ParsePath(%q): %v", bad, err)
		}
	}
}

// FuzzDecode: no input makes Decode panic or allocate without bound, and
// whatever decodes re-encodes to the same bytes (one encoding per object).
func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample())
	f.Add(good)
	empty, _ := Encode(&Object{})
	f.Add(empty)
	f.Add([]byte("CDBL"))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		again, err := Encode(o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n%x\n%x", data, again)
		}
	})
}
