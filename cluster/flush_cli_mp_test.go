package cluster_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/coordd/coordd/cluster"
)

// coordctl runs the CLI against the cluster and returns its stdout and
// exit code.
func coordctl(t *testing.T, l *cluster.Launcher, args ...string) (string, int) {
	t.Helper()
	return runCoordctl(t, ctlArgs(l), args...)
}

// coordctlPlain runs the CLI against plaintext endpoints (a `coordd dev`
// cluster, insecure on purpose).
func coordctlPlain(t *testing.T, endpoints string, args ...string) (string, int) {
	t.Helper()
	return runCoordctl(t, []string{"--endpoints", endpoints}, args...)
}

func runCoordctl(t *testing.T, conn []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(coordctlBinary, append(conn, append([]string{"--timeout", "20s"}, args...)...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		t.Logf("coordctl %v: exit %d: %s", args, ee.ExitCode(), errOut.String())
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("coordctl %v: %v", args, err)
	return "", -1
}

func coordctlJSON(t *testing.T, l *cluster.Launcher, v any, args ...string) {
	t.Helper()
	out, code := coordctl(t, l, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("coordctl %v: exit %d", args, code)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("coordctl %v: %v in %q", args, err, out)
	}
}

// TestCLIWritePath drives the write path only through coordctl, with the
// command names and JSON shapes later checks rely on: insert, flush
// --wait, segment list/get, binlog dump, checkpoint list, recovery-info.
func TestCLIWritePath(t *testing.T) {
	l, _, _ := startFlushCluster(t, 2)
	if _, code := coordctl(t, l, "vchannel", "alloc", "104", "2"); code != 0 {
		t.Fatal("vchannel alloc failed")
	}
	var ins struct {
		CollectionID int64 `json:"collection_id"`
		FirstPK      int64 `json:"first_pk"`
		LastPK       int64 `json:"last_pk"`
		Count        int64 `json:"count"`
	}
	coordctlJSON(t, l, &ins, "insert", "104", "1500")
	if ins.CollectionID != 104 || ins.Count != 1500 || ins.LastPK-ins.FirstPK+1 != 1500 {
		t.Fatalf("insert printed %+v", ins)
	}
	var fl struct {
		FlushTs uint64 `json:"flush_ts"`
		Flushed bool   `json:"flushed"`
	}
	coordctlJSON(t, l, &fl, "flush", "104", "--wait")
	if !fl.Flushed || fl.FlushTs == 0 {
		t.Fatalf("flush --wait printed %+v", fl)
	}
	var list struct {
		Segments []struct {
			SegmentID    int64  `json:"segment_id"`
			CollectionID int64  `json:"collection_id"`
			VChannel     string `json:"vchannel"`
			Level        string `json:"level"`
			State        string `json:"state"`
			RowCount     int64  `json:"row_count"`
		} `json:"segments"`
	}
	coordctlJSON(t, l, &list, "segment", "list", "--collection", "104", "--state", "Flushed")
	if len(list.Segments) == 0 {
		t.Fatal("no Flushed segments listed")
	}
	var paths []string
	for _, s := range list.Segments {
		if s.CollectionID != 104 || s.State != "Flushed" || s.Level != "L1" || s.VChannel == "" {
			t.Fatalf("segment list entry %+v", s)
		}
		var got struct {
			SegmentID   int64    `json:"segment_id"`
			RowCount    int64    `json:"row_count"`
			BinlogPaths []string `json:"binlog_paths"`
		}
		coordctlJSON(t, l, &got, "segment", "get", strconv.FormatInt(s.SegmentID, 10))
		if got.SegmentID != s.SegmentID || got.RowCount != s.RowCount || len(got.BinlogPaths) == 0 {
			t.Fatalf("segment get %d: %+v", s.SegmentID, got)
		}
		paths = append(paths, got.BinlogPaths...)
	}
	out, code := coordctl(t, l, append([]string{"binlog", "dump", "--object-store", filepath.Join(filepath.Dir(l.WALDir()), "objects")}, paths...)...)
	if code != 0 {
		t.Fatal("binlog dump failed")
	}
	count := map[int64]int{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var row struct {
			PK int64  `json:"pk"`
			TS uint64 `json:"ts"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.TS == 0 {
			t.Fatalf("binlog dump line %q: %v", sc.Text(), err)
		}
		count[row.PK]++
	}
	for pk := ins.FirstPK; pk <= ins.LastPK; pk++ {
		if count[pk] != 1 {
			t.Fatalf("pk %d dumped %d times", pk, count[pk])
		}
	}
	if len(count) != 1500 {
		t.Fatalf("%d distinct pks dumped", len(count))
	}
	var cps struct {
		Checkpoints []struct {
			VChannel string `json:"vchannel"`
			Position struct {
				Timestamp uint64 `json:"timestamp"`
			} `json:"position"`
		} `json:"checkpoints"`
	}
	coordctlJSON(t, l, &cps, "checkpoint", "list", "--collection", "104")
	if len(cps.Checkpoints) != 2 {
		t.Fatalf("checkpoint list: %+v", cps)
	}
	for _, cp := range cps.Checkpoints {
		if cp.Position.Timestamp < fl.FlushTs {
			t.Fatalf("%s checkpoint %d below flush_ts %d after flush --wait", cp.VChannel, cp.Position.Timestamp, fl.FlushTs)
		}
	}
	var ri struct {
		VChannel     string `json:"vchannel"`
		SeekPosition *struct {
			Timestamp uint64 `json:"timestamp"`
		} `json:"seek_position"`
		Flushed []struct {
			SegmentID int64 `json:"segment_id"`
		} `json:"flushed"`
	}
	coordctlJSON(t, l, &ri, "recovery-info", cps.Checkpoints[0].VChannel)
	if ri.VChannel != cps.Checkpoints[0].VChannel || ri.SeekPosition == nil || len(ri.Flushed) == 0 {
		t.Fatalf("recovery-info: %+v", ri)
	}
	// Bad input: usage error, nothing sent.
	if _, code := coordctl(t, l, "insert", "104", "0"); code != 2 {
		t.Fatalf("insert with 0 rows: exit %d, want 2", code)
	}
	if _, code := coordctl(t, l, "segment", "get", "999999"); code != 1 {
		t.Fatalf("segment get of a missing segment: exit %d, want 1", code)
	}
}
