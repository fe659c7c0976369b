package datadir

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
	raftwal "github.com/hashicorp/raft-wal"
	waltypes "github.com/hashicorp/raft-wal/types"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// The raft-wal segment format (v0.4.x) as far as the checks below read it:
// a 32-byte file header (magic, version, base index, segment ID, codec),
// then 8-byte-aligned frames, each an 8-byte header (type; length, or for a
// commit frame the CRC-32C of every byte since the previous commit frame,
// the file header included for the first) and its padded payload. One
// append writes its entry frames and one commit frame, then fsyncs; sealing
// adds an index frame (the entries' offsets) before the last commit.
const (
	walFileHeaderLen  = 32
	walFrameHeaderLen = 8
	walMagic          = 0x58eb6b0d

	walFrameInvalid = 0
	walFrameEntry   = 1
	walFrameIndex   = 2
	walFrameCommit  = 3

	walMetaBucket = "wal-meta"
	walMetaKey    = "m"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// walSegment is one checked segment: its metadata, its file's bytes and the
// offset of each entry frame, entry BaseIndex+i at offsets[i].
type walSegment struct {
	info    waltypes.SegmentInfo
	path    string
	data    []byte
	offsets []uint32
	last    uint64 // last index it holds (0: none)
}

// walLog is a read-only view of a checked raft-wal log (coordd inspect
// reads through it: raft-wal itself cannot open a log without writing).
type walLog struct {
	segs  []walSegment
	first uint64
	last  uint64
	codec raftwal.BinaryCodec
}

func (w *walLog) FirstIndex() (uint64, error) { return w.first, nil }
func (w *walLog) LastIndex() (uint64, error)  { return w.last, nil }

func (w *walLog) GetLog(idx uint64, out *raft.Log) error {
	if idx < w.first || idx > w.last || w.last == 0 {
		return raft.ErrLogNotFound
	}
	for i := range w.segs {
		s := &w.segs[i]
		if idx < s.info.BaseIndex || idx > s.last {
			continue
		}
		off := int(s.offsets[idx-s.info.BaseIndex])
		n := int(binary.LittleEndian.Uint32(s.data[off+4:]))
		return w.codec.Decode(s.data[off+walFrameHeaderLen:off+walFrameHeaderLen+n], out)
	}
	return raft.ErrLogNotFound
}

// checkWAL checks the raft-wal log under dir/wal before raft-wal opens it,
// because raft-wal repairs what it finds instead of refusing it: it deletes
// segment files its metadata does not list (all of them, if wal-meta.db is
// gone), and cuts the tail segment back to the last batch whose checksum
// holds, silently, wherever that is. So a member refuses (with rep filled in
// as checkBolt does for raft.db):
//   - wal-meta.db that bolt's consistency check rejects, or whose segment
//     list is not one contiguous run ending in a single unsealed tail;
//   - segment files present with no wal-meta.db;
//   - a listed sealed segment file that is missing; a segment shorter than
//     the size it was preallocated to (truncated) unless it is an empty
//     tail; a header naming another segment. (A missing tail segment is
//     taken as empty: raft-wal lists a segment before creating its file,
//     so a crash or a full disk in between leaves exactly that. Deleting
//     the newest segment by hand cannot be told apart from it.)
//   - a sealed segment any of whose batches fails its checksum, or that
//     holds fewer entries than its metadata says;
//   - a tail segment with a batch failing its checksum before the last
//     batch, or a malformed frame header anywhere: only the very last batch
//     may be torn (written but not yet fsynced when power went), and the
//     preallocated file is zeros after it. A stale tail left by an earlier
//     torn write and a shorter rewrite over it is refused too (rare; the
//     cost is replacing the member, not silent loss).
func checkWAL(dir string, rep *storageReport) (*walLog, error) {
	damaged := func(format string, args ...any) error {
		return &DamagedError{Dir: dir, Reason: WALDir + "/: " + fmt.Sprintf(format, args...)}
	}
	wd := filepath.Join(dir, WALDir)
	if fi, err := os.Stat(wd); err == nil && !fi.IsDir() {
		return nil, &DamagedError{Dir: dir, Reason: WALDir + " is a file, not the directory of the raft-wal log store"}
	}
	names, err := os.ReadDir(wd)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", wd, err)
	}
	rep.walPresent = true
	var segFiles []string
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".wal") {
			segFiles = append(segFiles, e.Name())
		}
	}
	metaPath := filepath.Join(wd, walMetaFile)
	if _, err := os.Stat(metaPath); errors.Is(err, os.ErrNotExist) {
		if len(segFiles) > 0 {
			return nil, damaged("%d segment files but no %s listing them", len(segFiles), walMetaFile)
		}
		return &walLog{}, nil
	}
	var ps waltypes.PersistentState
	if err := Guard(dir, "checking "+WALDir+"/"+walMetaFile, func() error { return readWALMeta(dir, metaPath, &ps) }); err != nil {
		return nil, err
	}
	log := &walLog{}
	for i, si := range ps.Segments {
		tail := si.SealTime.IsZero()
		if tail && i != len(ps.Segments)-1 {
			return nil, damaged("%s lists unsealed segment %d before the last one", walMetaFile, si.ID)
		}
		if i > 0 {
			prev := ps.Segments[i-1]
			if si.BaseIndex != prev.MaxIndex+1 {
				return nil, damaged("%s: segment %d starts at index %d but the one before ends at %d", walMetaFile, si.ID, si.BaseIndex, prev.MaxIndex)
			}
		}
		seg, err := checkWALSegment(wd, si, tail)
		if err != nil {
			return nil, damaged("%v", err)
		}
		log.segs = append(log.segs, seg)
	}
	// The logical log: from the first segment's MinIndex to the last index
	// held (entries below MinIndex are a head truncation raft asked for).
	for _, s := range log.segs {
		if s.last >= s.info.MinIndex && s.last > 0 {
			if log.first == 0 {
				log.first = s.info.MinIndex
			}
			log.last = s.last
		}
	}
	rep.firstIndex, rep.lastIndex = log.first, log.last
	if log.last > 0 {
		rep.afterSnap = log.last - max(rep.usableSnap, log.first-1)
		if log.last < rep.usableSnap {
			rep.afterSnap = 0
		}
	}
	return log, nil
}

// readWALMeta checks wal-meta.db with bolt (read-only) and decodes the
// segment list. It runs under guard.
func readWALMeta(dir, path string, ps *waltypes.PersistentState) error {
	damaged := func(format string, args ...any) error {
		return &DamagedError{Dir: dir, Reason: WALDir + "/" + walMetaFile + ": " + fmt.Sprintf(format, args...)}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return &InUseError{Dir: dir}
	}
	if err != nil {
		return damaged("%v", err)
	}
	defer db.Close()
	tx, err := db.Begin(false)
	if err != nil {
		return damaged("%v", err)
	}
	defer tx.Rollback()
	if tx.Size() > fi.Size() {
		return damaged("the file is %d bytes but its pages reach %d bytes (truncated)", fi.Size(), tx.Size())
	}
	if err := walkBolt(tx); err != nil {
		return damaged("%v", err)
	}
	for err := range tx.Check() {
		return damaged("consistency check failed: %v", err)
	}
	b := tx.Bucket([]byte(walMetaBucket))
	if b == nil {
		return nil // created but never committed a state: an empty log
	}
	raw := b.Get([]byte(walMetaKey))
	if raw == nil {
		return nil
	}
	if err := json.Unmarshal(raw, ps); err != nil {
		return damaged("the segment list is not valid JSON: %v", err)
	}
	return nil
}

// checkWALSegment reads one segment file and checks it against its
// metadata (see checkWAL).
func checkWALSegment(wd string, si waltypes.SegmentInfo, tail bool) (walSegment, error) {
	name := fmt.Sprintf("%020d-%016x.wal", si.BaseIndex, si.ID)
	seg := walSegment{info: si, path: filepath.Join(wd, name)}
	data, err := os.ReadFile(seg.path)
	if errors.Is(err, os.ErrNotExist) && tail {
		// raft-wal lists a new segment before it creates the file, and a
		// full disk can fail the creation: it makes the file on open.
		return seg, nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return seg, fmt.Errorf("segment file %s is missing", name)
	}
	if err != nil {
		return seg, fmt.Errorf("read segment %s: %w", name, err)
	}
	seg.data = data
	// A tail whose preallocation failed (full disk) is short but empty; one
	// with entries that is short was cut.
	short := si.SizeLimit > 0 && len(data) < int(si.SizeLimit)
	if short && (!tail || !allZero(data[min(len(data), walFileHeaderLen):])) {
		return seg, fmt.Errorf("segment %s is %d bytes but was preallocated to %d (truncated)", name, len(data), si.SizeLimit)
	}
	var offsets []uint32
	committed := 0 // entries covered by a verified commit
	crcStart := 0
	sawIndex := false
	off := walFileHeaderLen
	lastCommitBad := false
	for off+walFrameHeaderLen <= len(data) {
		h := data[off : off+walFrameHeaderLen]
		typ := h[0]
		if typ == walFrameInvalid && bytes.Equal(h, make([]byte, walFrameHeaderLen)) {
			break // zeros: the end of what was written
		}
		if typ > walFrameCommit || typ == walFrameInvalid || h[1] != 0 || h[2] != 0 || h[3] != 0 {
			return seg, fmt.Errorf("segment %s: malformed frame header at offset %d", name, off)
		}
		if lastCommitBad {
			return seg, fmt.Errorf("segment %s: the batch ending at offset %d fails its checksum and more frames follow it", name, crcStart)
		}
		v := binary.LittleEndian.Uint32(h[4:])
		if typ == walFrameCommit {
			if crc32.Checksum(data[crcStart:off], castagnoli) != v {
				if !tail {
					return seg, fmt.Errorf("sealed segment %s: the batch ending at offset %d fails its checksum", name, off)
				}
				lastCommitBad = true // torn, unless something follows
			} else {
				committed = len(offsets)
			}
			off += walFrameHeaderLen
			crcStart = off
			continue
		}
		size := walFrameHeaderLen + int(v) + (walFrameHeaderLen-int(v)%walFrameHeaderLen)%walFrameHeaderLen
		if off+size > len(data) {
			return seg, fmt.Errorf("segment %s: the frame at offset %d runs past the end of the file", name, off)
		}
		switch typ {
		case walFrameEntry:
			offsets = append(offsets, uint32(off))
		case walFrameIndex:
			sawIndex = true
			if !tail && uint64(off+walFrameHeaderLen) != si.IndexStart {
				return seg, fmt.Errorf("sealed segment %s: index at offset %d, metadata says %d", name, off+walFrameHeaderLen, si.IndexStart)
			}
		}
		off += size
	}
	if committed > 0 || !tail {
		hdr := data[:walFileHeaderLen]
		if binary.LittleEndian.Uint64(hdr[0:8]) != walMagic {
			return seg, fmt.Errorf("segment %s: bad file header", name)
		}
		if binary.LittleEndian.Uint64(hdr[8:16]) != si.BaseIndex || binary.LittleEndian.Uint64(hdr[16:24]) != si.ID {
			return seg, fmt.Errorf("segment %s: its header names another segment", name)
		}
	}
	seg.offsets = offsets[:committed]
	if committed > 0 {
		seg.last = si.BaseIndex + uint64(committed) - 1
	}
	if !tail {
		if si.MaxIndex >= si.BaseIndex && (seg.last < si.MaxIndex || !sawIndex) {
			return seg, fmt.Errorf("sealed segment %s holds entries up to %d but its metadata says %d", name, seg.last, si.MaxIndex)
		}
		seg.last = si.MaxIndex // a tail truncation may have cut it shorter
		if si.MaxIndex < si.BaseIndex {
			seg.last = 0
		}
	}
	return seg, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
