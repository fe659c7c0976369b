package harness

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
)

// Storage faults on a raft-wal data dir (wal/<base index>-<id>.wal
// segments, wal-meta.db) and on log-reach, the record of how far the log
// reached (docs/operations.md#what-the-start-up-checks-see). Each says
// whether it took away entries the member had stored durably: the index
// log-reach held before the damage (from coordd inspect) against the end
// of the log the harness reads from the segment files after it.

func isWALDamage(damage string) bool {
	switch damage {
	case nemesis.EmptyWAL, nemesis.ZeroWALTail, nemesis.CutWALSegment, nemesis.DropNewestSegment, nemesis.LoseLogReach:
		return true
	}
	return false
}

// inspected is what the harness reads of `coordd inspect --json`.
type inspected struct {
	LastIndex uint64 `json:"last_index"`
	LogReach  uint64 `json:"log_reach"`
	Snapshots []struct {
		Index uint64 `json:"index"`
	} `json:"snapshots"`
}

func (c *Cluster) inspect(dir string) (inspected, error) {
	var rep inspected
	out, err := exec.Command(c.bin.Coordd, "inspect", "--data-dir", dir, "--json").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return rep, fmt.Errorf("coordd inspect %s: %v: %s", dir, err, ee.Stderr)
		}
		return rep, fmt.Errorf("coordd inspect %s: %w", dir, err)
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("coordd inspect %s: %w", dir, err)
	}
	return rep, nil
}

func (c *Cluster) damageWAL(dir, damage string) (nemesis.DamageResult, error) {
	before, err := c.inspect(dir)
	if err != nil {
		return nemesis.DamageResult{}, err
	}
	var snap uint64
	if len(before.Snapshots) > 0 {
		snap = before.Snapshots[0].Index
	}
	if damage == nemesis.LoseLogReach {
		err := os.Remove(filepath.Join(dir, "log-reach"))
		if errors.Is(err, os.ErrNotExist) {
			return nemesis.DamageResult{Detail: "no log-reach to delete"}, nil
		}
		return nemesis.DamageResult{Detail: fmt.Sprintf("log-reach deleted (it held %d)", before.LogReach), LosesStored: err == nil}, err
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	sort.Strings(segs)
	var detail string
	var last uint64 // the log's last index after the damage
	switch damage {
	case nemesis.EmptyWAL:
		all, _ := filepath.Glob(filepath.Join(dir, "wal", "*"))
		for _, f := range all {
			if err := os.Remove(f); err != nil {
				return nemesis.DamageResult{}, err
			}
		}
		detail = fmt.Sprintf("%d files under wal/ deleted", len(all))
	default:
		if len(segs) == 0 {
			return nemesis.DamageResult{Detail: "no segment to damage"}, nil
		}
		newest := segs[len(segs)-1]
		var base uint64
		if _, err := fmt.Sscanf(filepath.Base(newest), "%020d-", &base); err != nil {
			return nemesis.DamageResult{}, fmt.Errorf("segment name %s: %w", newest, err)
		}
		data, err := os.ReadFile(newest)
		if err != nil {
			return nemesis.DamageResult{}, err
		}
		batches := committedBatches(data)
		switch damage {
		case nemesis.DropNewestSegment:
			err = os.Remove(newest)
			last = base - 1
			detail = fmt.Sprintf("newest segment %s deleted", filepath.Base(newest))
		case nemesis.ZeroWALTail:
			// From the end of the middle batch (or from the first entry).
			from, kept := int64(walHeaderLen), uint64(0)
			if len(batches) > 1 {
				b := batches[(len(batches)-1)/2]
				from, kept = b.end, b.entries
			}
			err = zeroTail(newest, from)
			last = base + kept - 1
			detail = fmt.Sprintf("zeros from offset %d of newest segment %s (%d of its entries kept)", from, filepath.Base(newest), kept)
		case nemesis.CutWALSegment:
			// Halfway into what was written (the rest of a segment is
			// preallocated zeros).
			half := int64(len(data) / 2)
			if len(batches) > 0 {
				half = batches[len(batches)-1].end / 2
			}
			var kept uint64
			for _, b := range batches {
				if b.end <= half {
					kept = b.entries
				}
			}
			err = os.Truncate(newest, half)
			last = base + kept - 1
			detail = fmt.Sprintf("newest segment %s cut to %d bytes", filepath.Base(newest), half)
		}
		if err != nil {
			return nemesis.DamageResult{}, err
		}
	}
	res := nemesis.DamageResult{Detail: detail, LosesStored: max(last, snap) < before.LogReach}
	res.Detail += fmt.Sprintf(" (log to %d, newest snapshot %d, stored durably up to %d)", last, snap, before.LogReach)
	return res, nil
}

// The raft-wal segment layout the damages read: a 32-byte header, then
// 8-byte-aligned frames with an 8-byte header (type, then a length or, for
// a commit frame, a checksum).
const (
	walHeaderLen = 32
	walEntry     = 1
	walCommit    = 3
)

// batch is one committed append in a segment: where its commit frame ends
// and how many entries the segment holds up to it.
type batch struct {
	end     int64
	entries uint64
}

func committedBatches(data []byte) []batch {
	var out []batch
	var entries uint64
	for off := walHeaderLen; off+8 <= len(data) && data[off] != 0; {
		typ := data[off]
		size := 8
		if typ != walCommit {
			n := int(binary.LittleEndian.Uint32(data[off+4:]))
			size += n + (8-n%8)%8
		}
		if typ == walEntry {
			entries++
		}
		off += size
		if typ == walCommit {
			out = append(out, batch{end: int64(off), entries: entries})
		}
	}
	return out
}

// zeroTail writes zeros over path from off to its end.
func zeroTail(path string, off int64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if off >= fi.Size() {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(make([]byte, fi.Size()-off), off)
	return err
}
