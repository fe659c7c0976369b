package backup

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// File layout (docs/operations.md#backup-and-restore):
//
//	offset 0     "COORDBK1\n"                      magic, 9 bytes
//	offset 9     header JSON, padded with spaces    to HeaderSize bytes, ending in '\n'
//	HeaderSize   the state machine snapshot         Header.Size bytes (fsm.WriteSnapshot's format)
//	end-32       SHA-256 of every byte before it    32 bytes
//
// The header has a fixed size so that the writer can stream the snapshot
// first and fill in its size afterwards; it is plain text so that `head -c
// 512 FILE` shows what a file holds.
const (
	magic = "COORDBK1\n"
	// HeaderSize is the fixed size of the magic plus the padded header.
	HeaderSize = 512
	// FormatVersion is the version of this layout; a reader refuses others.
	FormatVersion = 1
	sumSize       = sha256.Size
)

// ErrCorrupt marks a file that is not an intact backup.
var ErrCorrupt = errors.New("backup file is corrupt")

// Header describes the snapshot a backup file holds.
type Header struct {
	FormatVersion int    `json:"format_version"`
	ClusterID     string `json:"cluster_id"`
	LeaderID      string `json:"leader_id"`
	Index         uint64 `json:"index"` // raft index of the last command in the state
	Term          uint64 `json:"term"`  // term of that entry
	Size          uint64 `json:"size"`  // bytes of the state machine snapshot
	CreatedUnixMs int64  `json:"created_unix_ms"`
}

// encode renders h as the fixed-size header block.
func (h Header) encode() ([]byte, error) {
	h.FormatVersion = FormatVersion
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode backup header: %w", err)
	}
	if len(magic)+len(js)+1 > HeaderSize {
		return nil, fmt.Errorf("backup header of %d bytes does not fit in %d", len(js), HeaderSize-len(magic)-1)
	}
	out := make([]byte, HeaderSize)
	n := copy(out, magic)
	n += copy(out[n:], js)
	for ; n < HeaderSize-1; n++ {
		out[n] = ' '
	}
	out[HeaderSize-1] = '\n'
	return out, nil
}

// decodeHeader parses a header block.
func decodeHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize || string(b[:len(magic)]) != magic {
		return h, fmt.Errorf("%w: not a coordd backup (no %q magic)", ErrCorrupt, magic[:len(magic)-1])
	}
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimRight(b[len(magic):HeaderSize], " \n")))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, fmt.Errorf("%w: header: %v", ErrCorrupt, err)
	}
	if h.FormatVersion != FormatVersion {
		return h, fmt.Errorf("%w: format version %d, this coordd reads version %d", ErrCorrupt, h.FormatVersion, FormatVersion)
	}
	return h, nil
}

// Writer assembles a backup file: Begin writes a provisional header, the
// snapshot bytes go through Write, and Finish fills in the header and
// appends the checksum. The file must be seekable (a regular file).
type Writer struct {
	f    *os.File
	hdr  Header
	body hashCounter
}

// hashCounter hashes and counts what passes through it.
type hashCounter struct {
	h interface {
		io.Writer
		Sum([]byte) []byte
	}
	n uint64
}

// NewWriter starts a backup in f (which must be empty) with the given header
// (Size is filled in by Finish).
func NewWriter(f *os.File, h Header) (*Writer, error) {
	block, err := h.encode()
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(block); err != nil {
		return nil, fmt.Errorf("write backup header: %w", err)
	}
	return &Writer{f: f, hdr: h, body: hashCounter{h: sha256.New()}}, nil
}

// Write appends snapshot bytes.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.body.h.Write(p[:n])
	w.body.n += uint64(n)
	if err != nil {
		return n, fmt.Errorf("write backup: %w", err)
	}
	return n, nil
}

// BodySum is the SHA-256 of the snapshot bytes written so far.
func (w *Writer) BodySum() []byte { return w.body.h.Sum(nil) }

// BodySize is the number of snapshot bytes written so far.
func (w *Writer) BodySize() uint64 { return w.body.n }

// Finish writes the final header and the checksum, and syncs the file. It
// reads the file back to compute the checksum, so what is checksummed is
// what the disk returns.
func (w *Writer) Finish() (Header, []byte, error) {
	w.hdr.Size = w.body.n
	block, err := w.hdr.encode()
	if err != nil {
		return w.hdr, nil, err
	}
	if _, err := w.f.WriteAt(block, 0); err != nil {
		return w.hdr, nil, fmt.Errorf("write backup header: %w", err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(w.f, 0, int64(HeaderSize+w.body.n))); err != nil {
		return w.hdr, nil, fmt.Errorf("read backup back: %w", err)
	}
	sum := h.Sum(nil)
	if _, err := w.f.WriteAt(sum, int64(HeaderSize+w.body.n)); err != nil {
		return w.hdr, nil, fmt.Errorf("write backup checksum: %w", err)
	}
	if err := w.f.Sync(); err != nil {
		return w.hdr, nil, fmt.Errorf("sync backup: %w", err)
	}
	w.hdr.FormatVersion = FormatVersion
	return w.hdr, sum, nil
}

// File is an opened, verified backup file.
type File struct {
	Header Header
	SHA256 string // hex of the checksum
	r      io.ReaderAt
	closer io.Closer
}

// Open opens path and verifies it: magic, header, size and checksum. Every
// failure but a missing or unreadable file wraps ErrCorrupt.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w: not a regular file", path, ErrCorrupt)
	}
	bf, err := Read(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	bf.closer = f
	return bf, nil
}

// Read verifies a backup of size bytes held by r (Open does this for a
// file).
func Read(r io.ReaderAt, size int64) (*File, error) {
	block := make([]byte, HeaderSize)
	if size < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrCorrupt, size, HeaderSize)
	}
	if _, err := r.ReadAt(block, 0); err != nil {
		return nil, fmt.Errorf("read backup header: %w", err)
	}
	h, err := decodeHeader(block)
	if err != nil {
		return nil, err
	}
	want := int64(HeaderSize) + int64(h.Size) + sumSize
	if h.Size > uint64(size) || size != want {
		return nil, fmt.Errorf("%w: %d bytes, but the header says %d (truncated or extended)", ErrCorrupt, size, want)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(r, 0, want-sumSize)); err != nil {
		return nil, fmt.Errorf("read backup: %w", err)
	}
	stored := make([]byte, sumSize)
	if _, err := r.ReadAt(stored, want-sumSize); err != nil {
		return nil, fmt.Errorf("read backup checksum: %w", err)
	}
	got := sum.Sum(nil)
	if !bytes.Equal(got, stored) {
		return nil, fmt.Errorf("%w: SHA-256 mismatch (file says %x, content is %x)", ErrCorrupt, stored, got)
	}
	return &File{Header: h, SHA256: hex.EncodeToString(got), r: r}, nil
}

// Body returns a reader of the state machine snapshot.
func (b *File) Body() io.Reader {
	return io.NewSectionReader(b.r, HeaderSize, int64(b.Header.Size))
}

// Close closes the file (nothing for Read's backups).
func (b *File) Close() error {
	if b.closer == nil {
		return nil
	}
	return b.closer.Close()
}
