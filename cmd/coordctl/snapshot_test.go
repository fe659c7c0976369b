package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/client/clienttest"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// stateBytes is a small but real state machine snapshot.
func stateBytes(t *testing.T) []byte {
	t.Helper()
	st, _, err := fsm.New().ApplyCommands(3,
		commands.MustNew(&logpb.ReserveIDs{Count: 10}),
		commands.MustNew(&logpb.UpsertMember{Member: &logpb.Member{Id: "n1", RaftAddr: "127.0.0.1:7001"}}))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := st.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestSnapshotSaveAndInspect(t *testing.T) {
	fc := clienttest.Start(t, 3)
	fc.SetLeader(1)
	data := stateBytes(t)
	fc.SetSnapshot(data)
	file := filepath.Join(t.TempDir(), "backup.snap")

	code, out, errs := ctl(t, fc, "snapshot", "save", file, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	m := decode(t, out)
	if m["leader_id"] != "n2" || m["cluster_id"] != clienttest.BackupClusterID {
		t.Fatalf("output %s", out)
	}
	wantNumber(t, m, "state_bytes", int64(len(data)))
	wantNumber(t, m, "bytes", int64(backup.HeaderSize+len(data)+32))
	wantNumber(t, m, "index", int64(clienttest.BackupIndex))
	wantNumber(t, m, "term", int64(clienttest.BackupTerm))
	bf, err := backup.Open(file)
	if err != nil {
		t.Fatalf("saved file does not verify: %v", err)
	}
	body := make([]byte, bf.Header.Size)
	if _, err := bf.Body().Read(body); err != nil || !bytes.Equal(body, data) {
		t.Fatalf("saved state differs from the streamed one (%v)", err)
	}
	bf.Close()
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}

	// inspect: offline, counts per table, checksum verdict.
	code, out, errs = ctl(t, fc, "snapshot", "inspect", file)
	if code != exitOK || !strings.Contains(out, "(ok)") || !strings.Contains(out, "member") || !strings.Contains(out, "Index:       4242") {
		t.Fatalf("inspect: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = ctl(t, fc, "snapshot", "inspect", file, "-o", "json")
	var ij inspectJSON
	if code != exitOK || json.Unmarshal([]byte(out), &ij) != nil || ij.Checksum != "ok" {
		t.Fatalf("inspect -o json: exit %d %s", code, out)
	}
	counts := map[string]int{}
	for _, tb := range ij.Tables {
		counts[tb.Name] = tb.Count
	}
	if counts["member"] != 1 || counts["allocator"] != 1 {
		t.Fatalf("table counts %v", counts)
	}

	// FILE exists: refused before contacting the server, FILE unchanged.
	before, beforeStatus := fc.Nodes[1].Calls("SaveSnapshot"), fc.Nodes[0].Calls("Status")
	code, _, errs = ctl(t, fc, "snapshot", "save", file)
	if code != exitFail || !strings.Contains(errs, "already exists (use --force") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if fc.Nodes[1].Calls("SaveSnapshot") != before || fc.Nodes[0].Calls("Status") != beforeStatus {
		t.Fatal("an existing FILE still contacted the server")
	}

	// A stream whose end marker disagrees with the bytes: refused, FILE
	// untouched, no FILE.tmp.
	orig, _ := os.ReadFile(file)
	fc.SetBackupDamage(true)
	code, _, errs = ctl(t, fc, "snapshot", "save", "--force", file)
	if code != exitFail || !strings.Contains(errs, "is not what the leader sent") {
		t.Fatalf("damaged stream: exit %d, stderr %q", code, errs)
	}
	if now, _ := os.ReadFile(file); !bytes.Equal(now, orig) {
		t.Fatal("a failed save changed FILE")
	}
	if _, err := os.Stat(file + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
	fc.SetBackupDamage(false)
	if code, _, errs = ctl(t, fc, "snapshot", "save", "--force", file); code != exitOK {
		t.Fatalf("--force: exit %d: %s", code, errs)
	}
}

// TestSnapshotInspectRefusesDamage: every kind of damage is a clear error
// and a non-zero exit.
func TestSnapshotInspectRefusesDamage(t *testing.T) {
	fc := clienttest.Start(t, 1)
	fc.SetSnapshot(stateBytes(t))
	dir := t.TempDir()
	good := filepath.Join(dir, "good.snap")
	if code, _, errs := ctl(t, fc, "snapshot", "save", good); code != exitOK {
		t.Fatalf("save: %s", errs)
	}
	orig, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(off int) []byte {
		b := bytes.Clone(orig)
		b[off] ^= 0x40
		return b
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty file", nil, "shorter than the 512-byte header"},
		{"not a backup", bytes.Repeat([]byte("x"), 600), "not a coordd backup"},
		{"truncated", orig[:len(orig)-10], "truncated or extended"},
		{"extended", append(bytes.Clone(orig), 0), "truncated or extended"},
		{"flipped state byte", flip(backup.HeaderSize + 20), "SHA-256 mismatch"},
		{"flipped checksum byte", flip(len(orig) - 1), "SHA-256 mismatch"},
		{"flipped header byte", flip(len("COORDBK1\n") + 2), "backup file is corrupt"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(f, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := ctl(t, fc, "snapshot", "inspect", f)
			if code != exitFail || out != "" || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 with %q", code, out, errs, c.want)
			}
		})
	}
	if code, _, errs := ctl(t, fc, "snapshot", "inspect", filepath.Join(dir, "missing")); code != exitFail || !strings.Contains(errs, "no such file") {
		t.Fatalf("missing file: exit %d %q", code, errs)
	}
	if code, _, errs := ctl(t, fc, "snapshot", "inspect"); code != exitUsage || !strings.Contains(errs, "FILE") {
		t.Fatalf("no FILE: exit %d %q", code, errs)
	}
}
