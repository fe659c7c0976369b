package checker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/coordd/coordd/commands/logpb"
)

// snapshotMagic opens every coordd FSM snapshot (fsm/snapshot.go).
const snapshotMagic = "COORDSN1"

// SnapshotRecords decodes an FSM snapshot into its records (header first),
// each rendered as one line of protobuf text.
func SnapshotRecords(b []byte) (appliedIndex uint64, records []string, err error) {
	br := bufio.NewReader(bytes.NewReader(b))
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return 0, nil, fmt.Errorf("not a coordd snapshot (magic %q, %v)", magic, err)
	}
	opts := protodelim.UnmarshalOptions{MaxSize: 8 << 20}
	txt := prototext.MarshalOptions{}
	for i := 0; ; i++ {
		var rec logpb.SnapshotRecord
		if err := opts.UnmarshalFrom(br, &rec); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return appliedIndex, records, fmt.Errorf("record %d: %w", i, err)
		}
		if h := rec.GetHeader(); h != nil && i == 0 {
			appliedIndex = h.AppliedIndex
		}
		records = append(records, txt.Format(&rec))
	}
	return appliedIndex, records, nil
}

// SnapshotsIdentical compares the FSM snapshots of every member (by member
// ID), fetched when all members reported the same raft applied index. Equal
// FSM applied indexes with different bytes is a violation (replicas
// diverged); different FSM applied indexes mean the replicas had not
// converged yet and the caller should retry (converged=false).
func SnapshotsIdentical(snaps map[string][]byte) (r Result, converged bool) {
	r = Result{Checker: "replicas-identical", Verdict: Valid}
	var ids []string
	for id := range snaps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(ids) == 0 {
		r.Verdict, r.Summary = Unknown, "no snapshots"
		return r, true
	}
	type dec struct {
		applied uint64
		recs    []string
	}
	decoded := map[string]dec{}
	for _, id := range ids {
		a, recs, err := SnapshotRecords(snaps[id])
		if err != nil {
			r.violation("%s: undecodable snapshot: %v", id, err)
			continue
		}
		decoded[id] = dec{a, recs}
	}
	if r.Verdict == Invalid {
		return r, true
	}
	ref := ids[0]
	for _, id := range ids[1:] {
		if decoded[id].applied != decoded[ref].applied {
			r.Verdict = Unknown
			r.Summary = fmt.Sprintf("FSM applied index differs: %s at %d, %s at %d", ref, decoded[ref].applied, id, decoded[id].applied)
			return r, false
		}
	}
	for _, id := range ids[1:] {
		if bytes.Equal(snaps[id], snaps[ref]) {
			continue
		}
		a, b := decoded[ref].recs, decoded[id].recs
		diffs := 0
		for i := 0; i < max(len(a), len(b)); i++ {
			var x, y string
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y {
				diffs++
				if diffs <= 5 {
					r.violation("%s vs %s at FSM index %d, record %d:\n      %s: %s\n      %s: %s", ref, id, decoded[ref].applied, i, ref, x, id, y)
				}
			}
		}
		if diffs == 0 {
			r.violation("%s vs %s at FSM index %d: bytes differ but every record decodes equal", ref, id, decoded[ref].applied)
		}
	}
	r.Summary = fmt.Sprintf("%d replicas at FSM index %d, %d bytes", len(ids), decoded[ref].applied, len(snaps[ref]))
	return r, true
}
