package wal

import (
	"github.com/coordd/coordd/vocab"

	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
)

// Limits on one record.
const (
	MaxVChannelBytes = 1024
	MaxPayloadBytes  = 16 << 20
)

const (
	recordVersion = 1
	headerSize    = 8
	fixedBody     = 1 + 8 + 8 + 8 + 8 + 2
	maxBody       = fixedBody + MaxVChannelBytes + MaxPayloadBytes
	sectorSize    = 512
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// MessageID names one record: the term of the writer that appended it and
// its dense offset in the PChannel's log.
type MessageID struct {
	Term   int64
	Offset uint64
}

func (id MessageID) String() string { return fmt.Sprintf("%d/%d", id.Term, id.Offset) }

// Record is one message read back from a log. One 8-byte ID field on disk
// holds either ID; the payload decides which (dedup.go): BroadcastID on
// any message but a DML one, DedupID (an Insert's dedup_id) on a DML
// message. At most one of them is non-zero.
type Record struct {
	ID          MessageID
	Timestamp   uint64
	VChannel    string
	BroadcastID uint64
	DedupID     uint64
	Payload     []byte
}

// Errors. Match them with errors.Is; FencedError, TimestampError and
// CorruptError carry the details.
var (
	ErrFenced              = errors.New("fenced")
	ErrCorrupt             = errors.New("wal: corrupt")
	ErrClosed              = errors.New("wal: writer closed")
	ErrTimestampRegression = errors.New("wal: timestamp not increasing")
	ErrInvalid             = errors.New("wal: invalid argument")
)

// FencedError: a newer term than the writer's has been opened on PChannel.
type FencedError struct {
	PChannel string
	Fence    int64 // the term the PChannel is at
	Term     int64 // the term the refused writer holds (or asked for)
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("fenced: pchannel %s is at term %d, this writer holds term %d", e.PChannel, e.Fence, e.Term)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// TimestampError: an append's timestamp is not above the last one in the log
// (for instance another process appended with a newer timestamp). Allocate a
// fresh timestamp above Last and retry.
type TimestampError struct {
	PChannel string
	Last     uint64
	Got      uint64
}

func (e *TimestampError) Error() string {
	return fmt.Sprintf("wal: pchannel %s: timestamp %d is not above the log's last timestamp %d", e.PChannel, e.Got, e.Last)
}

// Is makes errors.Is(err, ErrTimestampRegression) true.
func (e *TimestampError) Is(target error) bool { return target == ErrTimestampRegression }

// CorruptError: the log or fence file holds bytes that are not a valid
// record (and not a torn tail).
type CorruptError struct {
	Path   string
	Pos    int64 // byte position in the file
	Reason string
	// TermRegression: a record's term is below the one before it, which
	// only a writer past the fence can cause.
	TermRegression bool
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("wal: corrupt %s at byte %d: %s", e.Path, e.Pos, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// ValidatePChannel checks that name can be a directory under the shared
// WAL directory: 1..200 bytes, no path separators, no NUL, not starting
// with '.'.
func ValidatePChannel(name string) error {
	if name == "" || len(name) > 200 {
		return invalidf("pchannel name must be 1..200 bytes, got %d", len(name))
	}
	if strings.ContainsAny(name, "/\\\x00") || name[0] == '.' {
		return invalidf("pchannel name %q: no '/', '\\', NUL or leading '.'", name)
	}
	return nil
}

// PChannelOf maps a channel name to its PChannel (vocab.PChannelOf).
func PChannelOf(vchannel string) string { return vocab.PChannelOf(vchannel) }

// encodeRecord appends the on-disk form of r to buf.
func encodeRecord(buf []byte, r *Record) []byte {
	n := fixedBody + len(r.VChannel) + len(r.Payload)
	start := len(buf)
	buf = append(buf, make([]byte, headerSize+n)...)
	b := buf[start+headerSize:]
	b[0] = recordVersion
	binary.LittleEndian.PutUint64(b[1:], uint64(r.ID.Term))
	binary.LittleEndian.PutUint64(b[9:], r.ID.Offset)
	binary.LittleEndian.PutUint64(b[17:], r.Timestamp)
	binary.LittleEndian.PutUint64(b[25:], r.dedupID())
	binary.LittleEndian.PutUint16(b[33:], uint16(len(r.VChannel)))
	copy(b[fixedBody:], r.VChannel)
	copy(b[fixedBody+len(r.VChannel):], r.Payload)
	binary.LittleEndian.PutUint32(buf[start:], uint32(n))
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(b, crcTable))
	return buf
}

// decodeBody parses a checksummed body; reason is non-empty when it is not
// a valid record.
func decodeBody(b []byte) (r Record, reason string) {
	if len(b) < fixedBody {
		return r, "short body"
	}
	if b[0] != recordVersion {
		return r, fmt.Sprintf("unknown record version %d", b[0])
	}
	r.ID.Term = int64(binary.LittleEndian.Uint64(b[1:]))
	r.ID.Offset = binary.LittleEndian.Uint64(b[9:])
	r.Timestamp = binary.LittleEndian.Uint64(b[17:])
	id := binary.LittleEndian.Uint64(b[25:])
	vl := int(binary.LittleEndian.Uint16(b[33:]))
	if vl > MaxVChannelBytes || fixedBody+vl > len(b) {
		return r, fmt.Sprintf("vchannel length %d does not fit", vl)
	}
	r.VChannel = string(b[fixedBody : fixedBody+vl])
	r.Payload = b[fixedBody+vl:]
	r.setDedupID(id)
	if r.ID.Term < 1 {
		return r, fmt.Sprintf("term %d", r.ID.Term)
	}
	return r, ""
}

// scanPos is how far a scan has come: the next record starts at byte pos
// and has offset next.
type scanPos struct {
	pos      int64
	next     uint64
	lastTerm int64
	lastTS   uint64
}

// scan reads records from st.pos up to size (the file size observed while
// holding the lock), calling fn for each valid one and advancing st. It
// stops after consuming at least limit bytes (limit 0: no limit). torn
// reports a torn tail starting at st.pos.
func scan(f *os.File, path string, size int64, st *scanPos, limit int64, fn func(*Record)) (torn bool, err error) {
	if size <= st.pos {
		return false, nil
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, st.pos, size-st.pos), 64<<10)
	corrupt := func(reason string) error { return &CorruptError{Path: path, Pos: st.pos, Reason: reason} }
	var consumed int64
	var hdr [headerSize]byte
	for st.pos < size {
		if limit > 0 && consumed >= limit {
			return false, nil
		}
		remaining := size - st.pos
		if remaining < headerSize {
			return true, nil
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return false, fmt.Errorf("wal: read %s: %w", path, err)
		}
		n := int64(binary.LittleEndian.Uint32(hdr[0:]))
		sum := binary.LittleEndian.Uint32(hdr[4:])
		if n < fixedBody || n > maxBody {
			zero, err := restIsZero(hdr[:], br)
			if err != nil {
				return false, fmt.Errorf("wal: read %s: %w", path, err)
			}
			if zero {
				return true, nil
			}
			return false, corrupt(fmt.Sprintf("record length %d out of range", n))
		}
		if headerSize+n > remaining {
			return true, nil
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(br, body); err != nil {
			return false, fmt.Errorf("wal: read %s: %w", path, err)
		}
		if crc32.Checksum(body, crcTable) != sum {
			if st.pos+headerSize+n == size && hasZeroSector(st.pos, hdr[:], body) {
				return true, nil
			}
			return false, corrupt("checksum mismatch")
		}
		rec, reason := decodeBody(body)
		switch {
		case reason != "":
			return false, corrupt(reason)
		case rec.ID.Offset != st.next:
			return false, corrupt(fmt.Sprintf("record offset %d, expected %d", rec.ID.Offset, st.next))
		case rec.ID.Term < st.lastTerm:
			return false, &CorruptError{Path: path, Pos: st.pos, TermRegression: true,
				Reason: fmt.Sprintf("record term %d after term %d", rec.ID.Term, st.lastTerm)}
		}
		fn(&rec)
		st.pos += headerSize + n
		st.next++
		st.lastTerm = rec.ID.Term
		st.lastTS = rec.Timestamp
		consumed += headerSize + n
	}
	return false, nil
}

func restIsZero(head []byte, r io.Reader) (bool, error) {
	if !allZero(head) {
		return false, nil
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if !allZero(buf[:n]) {
			return false, nil
		}
		if err == io.EOF {
			return true, nil
		}
		if err != nil {
			return false, err
		}
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// hasZeroSector reports whether the record at file position pos (header then
// body) contains a sector-aligned chunk of zeros: the signature of data that
// never reached the disk before a crash.
func hasZeroSector(pos int64, hdr, body []byte) bool {
	rec := make([]byte, 0, len(hdr)+len(body))
	rec = append(append(rec, hdr...), body...)
	for i := 0; i < len(rec); {
		end := i + int(sectorSize-(pos+int64(i))%sectorSize)
		if end > len(rec) {
			end = len(rec)
		}
		if allZero(rec[i:end]) {
			return true
		}
		i = end
	}
	return false
}
