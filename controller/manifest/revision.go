package manifest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
)

// Revision objects (docs/semantics.md#manifest-revisions):
//
//	"CDMANIF" | format version (1 byte) | CRC-32C of body (4 bytes, big endian) | body
//
// body is the deterministic protobuf encoding of coordpb.ManifestRevision,
// whose format_version repeats the header's. A reader refuses any other
// magic, an unknown format version, a checksum mismatch, trailing garbage
// in the body (protobuf would ignore unknown fields; none are written) and
// content that breaks the limits below.
const (
	// FormatVersion is the revision format this binary writes and reads.
	FormatVersion = 1
	// MaxRevisionBytes bounds one revision object.
	MaxRevisionBytes = 8 << 20
	// MaxColumnGroups, MaxEntries bound a revision's lists.
	MaxColumnGroups = 1024
	MaxEntries      = 65536
)

var (
	magic    = []byte("CDMANIF")
	castTab  = crc32.MakeTable(crc32.Castagnoli)
	errCodec = errors.New("invalid manifest revision")
	// ErrMutation marks a mutation that cannot apply to the revision.
	ErrMutation = errors.New("invalid manifest mutation")
)

const headerLen = 7 + 1 + 4

// Encode renders a revision as its object bytes.
func Encode(r *coordpb.ManifestRevision) ([]byte, error) {
	if err := ValidateRevision(r); err != nil {
		return nil, err
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode manifest revision: %w", err)
	}
	if headerLen+len(body) > MaxRevisionBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", errCodec, headerLen+len(body), MaxRevisionBytes)
	}
	out := make([]byte, 0, headerLen+len(body))
	out = append(out, magic...)
	out = append(out, FormatVersion)
	out = binary.BigEndian.AppendUint32(out, crc32.Checksum(body, castTab))
	return append(out, body...), nil
}

// Decode parses and checks revision object bytes.
func Decode(data []byte) (*coordpb.ManifestRevision, error) {
	if len(data) > MaxRevisionBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", errCodec, len(data), MaxRevisionBytes)
	}
	if len(data) < headerLen || !bytes.Equal(data[:7], magic) {
		return nil, fmt.Errorf("%w: bad magic", errCodec)
	}
	if data[7] != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d (this binary reads %d)", errCodec, data[7], FormatVersion)
	}
	body := data[headerLen:]
	if crc32.Checksum(body, castTab) != binary.BigEndian.Uint32(data[8:12]) {
		return nil, fmt.Errorf("%w: checksum mismatch", errCodec)
	}
	r := &coordpb.ManifestRevision{}
	if err := (proto.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(body, r); err != nil {
		return nil, fmt.Errorf("%w: %v", errCodec, err)
	}
	if len(r.ProtoReflect().GetUnknown()) != 0 {
		return nil, fmt.Errorf("%w: unknown fields", errCodec)
	}
	if err := ValidateRevision(r); err != nil {
		return nil, err
	}
	return r, nil
}

// ValidateRevision checks a revision's content.
func ValidateRevision(r *coordpb.ManifestRevision) error {
	switch {
	case r == nil:
		return fmt.Errorf("%w: missing", errCodec)
	case r.FormatVersion != FormatVersion:
		return fmt.Errorf("%w: format_version %d", errCodec, r.FormatVersion)
	case r.SegmentId <= 0 || r.Version <= 0:
		return fmt.Errorf("%w: segment %d version %d", errCodec, r.SegmentId, r.Version)
	case len(r.ColumnGroups) > MaxColumnGroups || len(r.DeltaLogs) > MaxEntries || len(r.Stats) > MaxEntries || len(r.Indexes) > MaxEntries:
		return fmt.Errorf("%w: too many entries", errCodec)
	}
	if err := validateGroups(r.ColumnGroups); err != nil {
		return err
	}
	if err := validateFileList(r.DeltaLogs); err != nil {
		return err
	}
	keys := map[string]bool{}
	for _, s := range r.Stats {
		if s.Key == "" || keys[s.Key] {
			return fmt.Errorf("%w: empty or repeated stats key %q", errCodec, s.Key)
		}
		keys[s.Key] = true
		if err := validateFileList(s.Files); err != nil {
			return err
		}
	}
	builds := map[int64]bool{}
	for _, ix := range r.Indexes {
		if ix.BuildId <= 0 || builds[ix.BuildId] || ix.IndexId <= 0 || ix.FieldId < 0 {
			return fmt.Errorf("%w: index entry with bad or repeated build id %d", errCodec, ix.BuildId)
		}
		builds[ix.BuildId] = true
		if err := validateFileList(ix.Files); err != nil {
			return err
		}
	}
	return nil
}

func validateGroups(gs []*coordpb.ManifestColumnGroup) error {
	seen := map[int64]bool{}
	for _, g := range gs {
		if len(g.FieldIds) == 0 {
			return fmt.Errorf("%w: column group without fields", errCodec)
		}
		for _, f := range g.FieldIds {
			if f < 0 || seen[f] {
				return fmt.Errorf("%w: field %d negative or in two column groups", errCodec, f)
			}
			seen[f] = true
		}
		if err := validateFileList(g.Files); err != nil {
			return err
		}
	}
	return nil
}

func validateFileList(files []string) error {
	if len(files) > MaxEntries {
		return fmt.Errorf("%w: %d files (max %d)", errCodec, len(files), MaxEntries)
	}
	for _, f := range files {
		if _, err := commands.ParseObjectKey(f); err != nil {
			return fmt.Errorf("%w: %v", errCodec, err)
		}
	}
	return nil
}

// Mutate returns the revision that mutation m makes of cur (nil: the
// segment has no revision yet), numbered version. cur is not modified.
// PublishPreparedManifest is not a structured mutation and is refused.
func Mutate(cur *coordpb.ManifestRevision, segment, version int64, m *coordpb.ManifestMutation) (*coordpb.ManifestRevision, error) {
	next := &coordpb.ManifestRevision{}
	if cur != nil {
		next = proto.Clone(cur).(*coordpb.ManifestRevision)
	}
	next.FormatVersion, next.SegmentId, next.Version = FormatVersion, segment, version
	switch k := m.GetKind().(type) {
	case *coordpb.ManifestMutation_Create:
		if cur != nil {
			return nil, fmt.Errorf("%w: segment %d already has a manifest (version %d)", ErrMutation, segment, cur.Version)
		}
		next.ColumnGroups, next.DeltaLogs = cloneGroups(k.Create.ColumnGroups), slices.Clone(k.Create.DeltaLogs)
	case *coordpb.ManifestMutation_AddIndexes:
		for _, ix := range k.AddIndexes.Indexes {
			next.Indexes = slices.DeleteFunc(next.Indexes, func(o *coordpb.ManifestIndexEntry) bool { return o.BuildId == ix.BuildId })
			next.Indexes = append(next.Indexes, proto.Clone(ix).(*coordpb.ManifestIndexEntry))
		}
		slices.SortFunc(next.Indexes, func(a, b *coordpb.ManifestIndexEntry) int { return cmp.Compare(a.BuildId, b.BuildId) })
	case *coordpb.ManifestMutation_DropIndexes:
		next.Indexes = slices.DeleteFunc(next.Indexes, func(o *coordpb.ManifestIndexEntry) bool {
			return slices.Contains(k.DropIndexes.BuildIds, o.BuildId)
		})
	case *coordpb.ManifestMutation_AddStats:
		for _, s := range k.AddStats.Stats {
			next.Stats = slices.DeleteFunc(next.Stats, func(o *coordpb.ManifestStatsEntry) bool { return o.Key == s.Key })
			next.Stats = append(next.Stats, proto.Clone(s).(*coordpb.ManifestStatsEntry))
		}
		slices.SortFunc(next.Stats, func(a, b *coordpb.ManifestStatsEntry) int { return cmp.Compare(a.Key, b.Key) })
	case *coordpb.ManifestMutation_AppendData:
		appendData(next, k.AppendData)
	case *coordpb.ManifestMutation_ReplaceData:
		next.ColumnGroups, next.DeltaLogs = cloneGroups(k.ReplaceData.ColumnGroups), slices.Clone(k.ReplaceData.DeltaLogs)
		next.Indexes = nil // the indexed data is gone
	default:
		return nil, fmt.Errorf("%w: %T is not a structured mutation", ErrMutation, m.GetKind())
	}
	if err := ValidateRevision(next); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMutation, err)
	}
	return next, nil
}

// appendData appends files to the group with exactly the same field set
// (or adds the group) and drops index entries on the fields it touched:
// an index no longer covers the column's data.
func appendData(next *coordpb.ManifestRevision, a *coordpb.AppendData) {
	for _, g := range a.ColumnGroups {
		fields := slices.Sorted(slices.Values(g.FieldIds))
		i := slices.IndexFunc(next.ColumnGroups, func(o *coordpb.ManifestColumnGroup) bool {
			return slices.Equal(slices.Sorted(slices.Values(o.FieldIds)), fields)
		})
		if i < 0 {
			next.ColumnGroups = append(next.ColumnGroups, &coordpb.ManifestColumnGroup{FieldIds: fields, Files: slices.Clone(g.Files)})
		} else {
			next.ColumnGroups[i].Files = append(next.ColumnGroups[i].Files, g.Files...)
		}
		next.Indexes = slices.DeleteFunc(next.Indexes, func(ix *coordpb.ManifestIndexEntry) bool { return slices.Contains(fields, ix.FieldId) })
	}
	next.DeltaLogs = append(next.DeltaLogs, a.DeltaLogs...)
}

func cloneGroups(gs []*coordpb.ManifestColumnGroup) []*coordpb.ManifestColumnGroup {
	out := make([]*coordpb.ManifestColumnGroup, len(gs))
	for i, g := range gs {
		out[i] = proto.Clone(g).(*coordpb.ManifestColumnGroup)
	}
	return out
}
