package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/coordd/coordd/raftnode/datadir"
)

// TestRestoreAcceptsFloorsUpToTheBounds: the largest ID and timestamp
// floors restore allows are admitted, and a timestamp floor more than a
// day ahead of the clock is admitted with --yes (the refusals are rows of
// TestOfflineCommandsRefuseBadInput). The restored floors are the ones
// asked for.
func TestRestoreAcceptsFloorsUpToTheBounds(t *testing.T) {
	file, _ := writeBackup(t)
	for _, c := range []struct {
		name          string
		idFloor, tsMs string
		extra         []string
	}{
		{"2^62 and the last timestamp floor", strconv.FormatUint(datadir.MaxRestoreIDFloor, 10),
			strconv.FormatInt(datadir.MaxRestoreTSOFloorMs, 10), []string{"--yes"}},
		{"a floor in 2100 with --yes", "100", "4102444800000", []string{"--yes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			args := append([]string{"restore", "--snapshot", file, "--data-dir", dir, "--id", "n1", "--raft-addr", "127.0.0.1:7101",
				"--id-floor", c.idFloor, "--ts-floor-ms", c.tsMs, "--json"}, c.extra...)
			code, out, errs := runCmd(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var got struct {
				IDFloor uint64 `json:"id_floor"`
				TSMs    int64  `json:"tso_floor_unix_ms"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if strconv.FormatUint(got.IDFloor, 10) != c.idFloor || strconv.FormatInt(got.TSMs, 10) != c.tsMs {
				t.Fatalf("restored floors %+v, asked for %s and %s", got, c.idFloor, c.tsMs)
			}
		})
	}
}

// TestRestoreDataDirRefusesUnusableFloors: the data-dir step checks the
// bounds itself (a caller other than the CLI), before it creates anything.
func TestRestoreDataDirRefusesUnusableFloors(t *testing.T) {
	for _, c := range []struct {
		id uint64
		ts int64
	}{{datadir.MaxRestoreIDFloor + 1, 0}, {1 << 63, 0}, {100, datadir.MaxRestoreTSOFloorMs + 1}, {100, -1}} {
		dir := filepath.Join(t.TempDir(), "d")
		_, err := datadir.RestoreDataDir(datadir.RestoreConfig{Dir: dir, ID: "n1", RaftAddr: "127.0.0.1:7101", Index: 7, Term: 3,
			IDFloor: c.id, TSOFloorMs: c.ts})
		if err == nil {
			t.Fatalf("floors %d, %d: restored", c.id, c.ts)
		}
		if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
			t.Fatalf("floors %d, %d: %v, and it created %s", c.id, c.ts, err, dir)
		}
	}
}
