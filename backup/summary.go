package backup

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// Table is one kind of record in a state machine snapshot.
type Table struct {
	Name   string `json:"name"`   // the SnapshotRecord field name (member, collection, segment, ...)
	Count  int    `json:"count"`  // records of this kind
	Bytes  int64  `json:"bytes"`  // their encoded size
	SHA256 string `json:"sha256"` // over their encodings, in snapshot order
}

// Summary describes a state machine snapshot table by table. Snapshots are
// deterministic (equal states give equal bytes), so equal digests mean equal
// tables.
type Summary struct {
	AppliedIndex uint64  `json:"applied_index"`
	Records      uint64  `json:"records"`
	Tables       []Table `json:"tables"`
}

// Table returns the named table (zero if the snapshot has none).
func (s Summary) Table(name string) Table {
	for _, t := range s.Tables {
		if t.Name == name {
			return t
		}
	}
	return Table{Name: name}
}

// maxRecord bounds one record, as the state machine's reader does.
const maxRecord = 8 << 20

var recordFields = (&logpb.SnapshotRecord{}).ProtoReflect().Descriptor().Fields()

// Summarize reads a state machine snapshot (fsm.WriteSnapshot's format) and
// summarizes it. It checks the framing and the record count, not the
// records' contents: Validate does that.
func Summarize(r io.Reader) (Summary, error) {
	var s Summary
	br := bufio.NewReaderSize(r, 64<<10)
	mg := make([]byte, 8)
	if _, err := io.ReadFull(br, mg); err != nil {
		return s, fmt.Errorf("%w: snapshot magic: %v", ErrCorrupt, err)
	}
	type acc struct {
		t Table
		h interface {
			io.Writer
			Sum([]byte) []byte
		}
	}
	tables := map[protowire.Number]*acc{}
	var raw []byte
	sawHeader := false
	for i := uint64(0); ; i++ {
		n, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || n > maxRecord || n == 0 {
			return s, fmt.Errorf("%w: record %d: bad length prefix", ErrCorrupt, i)
		}
		if uint64(cap(raw)) < n {
			raw = make([]byte, n)
		}
		raw = raw[:n]
		if _, err := io.ReadFull(br, raw); err != nil {
			return s, fmt.Errorf("%w: record %d: %v", ErrCorrupt, i, io.ErrUnexpectedEOF)
		}
		num, _, tl := protowire.ConsumeTag(raw)
		if tl < 0 {
			return s, fmt.Errorf("%w: record %d: bad tag", ErrCorrupt, i)
		}
		if i == 0 {
			var rec logpb.SnapshotRecord
			if err := proto.Unmarshal(raw, &rec); err != nil || rec.GetHeader() == nil {
				return s, fmt.Errorf("%w: the snapshot does not start with its header", ErrCorrupt)
			}
			s.AppliedIndex, s.Records, sawHeader = rec.GetHeader().AppliedIndex, rec.GetHeader().RecordCount, true
			continue
		}
		a := tables[num]
		if a == nil {
			name := fmt.Sprintf("field_%d", num)
			if fd := recordFields.ByNumber(num); fd != nil {
				name = string(fd.Name())
			}
			a = &acc{t: Table{Name: name}, h: sha256.New()}
			tables[num] = a
		}
		a.t.Count++
		a.t.Bytes += int64(n)
		a.h.Write(raw)
	}
	if !sawHeader {
		return s, fmt.Errorf("%w: empty snapshot", ErrCorrupt)
	}
	total := 0
	nums := make([]int, 0, len(tables))
	for num, a := range tables {
		nums = append(nums, int(num))
		total += a.t.Count
	}
	if uint64(total) != s.Records {
		return s, fmt.Errorf("%w: %d records, the snapshot header says %d", ErrCorrupt, total, s.Records)
	}
	sort.Ints(nums)
	for _, num := range nums {
		a := tables[protowire.Number(num)]
		a.t.SHA256 = hex.EncodeToString(a.h.Sum(nil))
		s.Tables = append(s.Tables, a.t)
	}
	return s, nil
}

// Validate decodes a state machine snapshot fully, as a member restoring it
// would (invariants included), and returns the state.
func Validate(r io.Reader) (*fsm.State, error) {
	st, err := fsm.ReadSnapshot(r)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return st, nil
}

// SummarizeState summarizes a state through its snapshot encoding.
func SummarizeState(st *fsm.State) (Summary, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(st.WriteSnapshot(pw)) }()
	s, err := Summarize(pr)
	pr.CloseWithError(errors.New("summary done"))
	return s, err
}
