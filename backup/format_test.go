package backup

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

func sampleState(t testing.TB) []byte {
	t.Helper()
	st, _, err := fsm.New().ApplyCommands(5,
		commands.MustNew(&logpb.ReserveIDs{Count: 3}),
		commands.MustNew(&logpb.UpsertMember{Member: &logpb.Member{Id: "n1", RaftAddr: "127.0.0.1:1"}}),
		commands.MustNew(&logpb.UpsertMember{Member: &logpb.Member{Id: "n2", RaftAddr: "127.0.0.1:2"}}))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := st.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeFile(t testing.TB, body []byte, h Header) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "b.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewWriter(f, h)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(body); off += 7 { // several writes
		if _, err := w.Write(body[off:min(off+7, len(body))]); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRoundTrip(t *testing.T) {
	body := sampleState(t)
	path := writeFile(t, body, Header{ClusterID: "c1", LeaderID: "n1", Index: 5, Term: 2, CreatedUnixMs: 1})
	bf, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer bf.Close()
	if h := bf.Header; h.ClusterID != "c1" || h.Index != 5 || h.Term != 2 || h.Size != uint64(len(body)) || h.FormatVersion != FormatVersion {
		t.Fatalf("header %+v", h)
	}
	got, _ := io.ReadAll(bf.Body())
	if !bytes.Equal(got, body) {
		t.Fatal("body differs")
	}
	sum, err := Summarize(bf.Body())
	if err != nil {
		t.Fatal(err)
	}
	if sum.AppliedIndex != 5 || sum.Table("member").Count != 2 || sum.Table("allocator").Count != 1 || sum.Table("segment").Count != 0 {
		t.Fatalf("summary %+v", sum)
	}
	if _, err := Validate(bf.Body()); err != nil {
		t.Fatal(err)
	}
}

// TestHeaderTooLarge: a header that would not fit is refused, not truncated.
func TestHeaderTooLarge(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := NewWriter(f, Header{ClusterID: string(bytes.Repeat([]byte("x"), HeaderSize))}); err == nil {
		t.Fatal("an oversized header was accepted")
	}
}

// TestSummarizeRefusesBadFraming: record counts and framing are checked.
func TestSummarizeRefusesBadFraming(t *testing.T) {
	body := sampleState(t)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"magic only":     body[:8],
		"truncated":      body[:len(body)-3],
		"record missing": body[:len(body)-int(body[len(body)-1])], // cut into the last record
	} {
		if _, err := Summarize(bytes.NewReader(b)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}
}

// FuzzRead: no input makes the reader panic, and whatever it accepts has
// a verified checksum.
func FuzzRead(f *testing.F) {
	body := sampleState(f)
	good, err := os.ReadFile(writeFile(f, body, Header{ClusterID: "c", Index: 5, Term: 1}))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:HeaderSize])
	f.Add([]byte(magic + "{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		bf, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not marked corrupt: %v", err)
			}
			return
		}
		_, _ = Summarize(bf.Body())
		_, _ = Validate(bf.Body())
	})
}

// TestOpenRefusesTrailingBytes: anything after the checksum is refused,
// whatever it is (a second backup appended, zero padding, one byte), both
// by Open and by Read; so is a file cut anywhere before the end.
func TestOpenRefusesTrailingBytes(t *testing.T) {
	path := writeFile(t, sampleState(t), Header{ClusterID: "c1", Index: 5, Term: 2})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"one byte":          append(bytes.Clone(good), 0),
		"zero padding":      append(bytes.Clone(good), make([]byte, 4096)...),
		"a second backup":   append(bytes.Clone(good), good...),
		"the checksum cut":  good[:len(good)-1],
		"only the header":   good[:HeaderSize],
		"the body cut":      good[:HeaderSize+3],
		"a repeated digest": append(bytes.Clone(good), good[len(good)-sumSize:]...),
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "b.snap")
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if bf, err := Open(p); !errors.Is(err, ErrCorrupt) {
				if bf != nil {
					bf.Close()
				}
				t.Fatalf("Open accepted %d bytes (a good file has %d): %v", len(data), len(good), err)
			}
			if _, err := Read(bytes.NewReader(data), int64(len(data))); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Read accepted %d bytes: %v", len(data), err)
			}
		})
	}
}
