package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

// runCmd runs coordd with args and returns the exit code and output.
func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeBackup writes a backup of a small state (index 7, term 3) and
// returns its path and the state's snapshot bytes.
func writeBackup(t *testing.T) (string, []byte) {
	t.Helper()
	st, _, err := fsm.New().ApplyCommands(7,
		commands.MustNew(&logpb.LeaderEstablished{Term: 3, LeaderId: "old1"}),
		commands.MustNew(&logpb.ReserveIDs{Count: 10}),
		commands.MustNew(&logpb.UpsertMember{Member: &logpb.Member{Id: "old1", RaftAddr: "127.0.0.1:7001"}}))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := st.WriteSnapshot(&body); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "b.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := backup.NewWriter(f, backup.Header{ClusterID: "oldcluster", Index: 7, Term: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return path, body.Bytes()
}

// restoredSnapshotBytes returns the state bytes of the only raft snapshot
// in a data dir.
func restoredSnapshotBytes(t *testing.T, dir string) []byte {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "snapshots", "*", "state.bin"))
	if err != nil || len(m) != 1 {
		t.Fatalf("snapshots in %s: %v %v", dir, m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRestoreInspectRecover(t *testing.T) {
	file, body := writeBackup(t)
	dir := filepath.Join(t.TempDir(), "n1")
	code, out, errs := runCmd("restore", "--snapshot", file, "--data-dir", dir, "--id", "n1", "--raft-addr", "127.0.0.1:7101",
		"--id-floor", "1000", "--ts-floor-ms", farTSFloor, "--yes")
	if code != 0 || !strings.Contains(out, "new cluster") || !strings.Contains(out, "first ID is at least 1000") {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
	}
	if got := restoredSnapshotBytes(t, dir); !bytes.Equal(got, body) {
		t.Fatal("the restored raft snapshot is not byte-identical to the backup's state")
	}

	code, out, errs = runCmd("inspect", "--data-dir", dir, "--json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, errs)
	}
	var rep struct {
		Identity      datadir.Identity  `json:"identity"`
		CurrentTerm   uint64            `json:"current_term"`
		LastIndex     uint64            `json:"last_index"`
		LastTerm      uint64            `json:"last_term"`
		Configuration []raftnode.Server `json:"configuration"`
		State         backup.Summary    `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("inspect JSON: %v\n%s", err, out)
	}
	want := restoredSummary(t, body, 1000)
	if rep.Identity.MemberID != "n1" || rep.Identity.ClusterID == "" || rep.Identity.ClusterID == "oldcluster" ||
		rep.CurrentTerm != 3 || rep.LastIndex != 8 || rep.LastTerm != 3 ||
		len(rep.Configuration) != 1 || rep.Configuration[0].ID != "n1" || !rep.Configuration[0].Voter {
		t.Fatalf("inspect after restore: %+v", rep)
	}
	if g, w := mustJSON(t, rep.State), mustJSON(t, want); g != w {
		t.Fatalf("inspected state %s, backup state %s", g, w)
	}
	code, out, _ = runCmd("inspect", "--data-dir", dir)
	if code != 0 || !strings.Contains(out, "Last index:         8 (term 3)") ||
		!strings.Contains(out, "Allocator next ID:  1000") || !strings.Contains(out, "n1=127.0.0.1:7101 (voter)") {
		t.Fatalf("inspect text: exit %d\n%s", code, out)
	}

	// recover rewrites the configuration and keeps the state.
	peers := filepath.Join(t.TempDir(), "peers.json")
	os.WriteFile(peers, []byte(`[{"id": "n1", "address": "127.0.0.1:7201"}, {"id": "n4", "address": "127.0.0.1:7204", "non_voter": true}]`), 0o600)
	code, out, errs = runCmd("recover", "--data-dir", dir, "--peers-file", peers)
	if code != 0 || !strings.Contains(out, "n1=127.0.0.1:7201, n4=127.0.0.1:7204") {
		t.Fatalf("recover: exit %d\n%s%s", code, out, errs)
	}
	after, err := datadir.InspectDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := backup.SummarizeState(after.State)
	if mustJSON(t, got) != mustJSON(t, want) || after.CurrentTerm != 3 || len(after.Configuration) != 2 || after.Configuration[1].Voter {
		t.Fatalf("after recover: %+v", after)
	}
}

// farTSFloor is a --ts-floor-ms above any test machine's clock, so the
// restored state does not depend on the time the test runs (with --yes:
// it is more than a day ahead of the clock).
const farTSFloor = "4102444800000" // 2100-01-01

// restoredSummary is the summary of the state a restore of body with
// --id-floor idFloor and --ts-floor-ms farTSFloor rebuilds: the backup's
// state plus the RaiseAllocatorFloors entry after it.
func restoredSummary(t *testing.T, body []byte, idFloor uint64) backup.Summary {
	t.Helper()
	st, err := fsm.ReadSnapshot(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	st, _, err = st.ApplyCommands(st.AppliedIndex()+1, commands.MustNew(&logpb.RaiseAllocatorFloors{NextId: idFloor, TsoLimitPhysicalMs: 4102444800000}))
	if err != nil {
		t.Fatal(err)
	}
	sum, err := backup.SummarizeState(st)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirListing names every file under dir, to show nothing changed.
func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil {
			out = append(out, strings.TrimPrefix(p, dir)+":"+fi.ModTime().String())
		}
		return nil
	})
	return strings.Join(out, "\n")
}

// TestOfflineCommandsRefuseBadInput: every bad input is a clear one-line
// error, a non-zero exit, and changes nothing.
func TestOfflineCommandsRefuseBadInput(t *testing.T) {
	file, _ := writeBackup(t)
	corrupt := filepath.Join(t.TempDir(), "corrupt.snap")
	data, _ := os.ReadFile(file)
	data[backup.HeaderSize+5] ^= 1
	os.WriteFile(corrupt, data, 0o600)

	// A file whose checksum is right but whose state is not a valid
	// snapshot (written by a broken tool): refused by the state check.
	badState := filepath.Join(t.TempDir(), "badstate.snap")
	if f, err := os.Create(badState); err != nil {
		t.Fatal(err)
	} else {
		w, err := backup.NewWriter(f, backup.Header{ClusterID: "x", Index: 7, Term: 3})
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("COORDSN1 not records"))
		if _, _, err := w.Finish(); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}

	seeded := filepath.Join(t.TempDir(), "seeded")
	if code, _, errs := runCmd("restore", "--snapshot", file, "--data-dir", seeded, "--id", "n1", "--raft-addr", "127.0.0.1:7101", "--id-floor", "100"); code != 0 {
		t.Fatal(errs)
	}
	nonEmpty := t.TempDir()
	os.WriteFile(filepath.Join(nonEmpty, "keep"), []byte("x"), 0o600)
	fresh := filepath.Join(t.TempDir(), "fresh")
	peersDir := t.TempDir()
	npeers := 0
	peers := func(content string) string {
		npeers++
		p := filepath.Join(peersDir, fmt.Sprintf("peers%d.json", npeers))
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	restore := func(extra ...string) []string {
		args := []string{"restore", "--snapshot", file, "--data-dir", fresh, "--id", "n1", "--raft-addr", "127.0.0.1:7101", "--id-floor", "100", "--ts-floor-ms", "0"}
		for i := 0; i+1 < len(extra); i += 2 {
			for j := 1; j+1 < len(args); j += 2 {
				if args[j] == extra[i] {
					args[j+1] = extra[i+1]
				}
			}
		}
		return args
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"restore without flags", []string{"restore"}, 2, "--snapshot is required"},
		{"restore without id", restore("--id", ""), 2, "--id is required"},
		{"restore without id floor", restore("--id-floor", ""), 2, "--id-floor is required"},
		{"restore bad id floor", restore("--id-floor", "-3"), 2, "--id-floor"},
		{"restore id floor below the backup's", restore("--id-floor", "5"), 2, "below the backup's own next ID 11"},
		{"restore bad ts floor", restore("--ts-floor-ms", "-1"), 2, "--ts-floor-ms"},
		// Floors the restored cluster could not allocate from (probe D13).
		{"restore id floor 2^63", restore("--id-floor", "9223372036854775808"), 2, "leaves too few IDs below 2^63"},
		{"restore id floor 2^63-1", restore("--id-floor", "9223372036854775807"), 2, "at most 4611686018427387904 (2^62)"},
		{"restore id floor 2^64-1", restore("--id-floor", "18446744073709551615"), 2, "leaves too few IDs below 2^63"},
		{"restore id floor 2^62+1", restore("--id-floor", "4611686018427387905"), 2, "leaves too few IDs below 2^63"},
		{"restore ts floor 2^46-1", restore("--ts-floor-ms", "70368744177663"), 2, "leaves less than a year below the timestamp limit"},
		{"restore ts floor near 2^46", restore("--ts-floor-ms", "70368744170000"), 2, "leaves less than a year below the timestamp limit"},
		{"restore ts floor near 2^46 with --yes", append(restore("--ts-floor-ms", "70368744170000"), "--yes"), 2, "less than a year below"},
		{"restore ts floor in 2100", restore("--ts-floor-ms", "4102444800000"), 2, "more than a day ahead of this machine's clock"},
		{"restore ts floor 2^45", restore("--ts-floor-ms", "35184372088832"), 2, "add --yes if that is meant"},
		{"restore ts floor in two days", restore("--ts-floor-ms", strconv.FormatInt(time.Now().Add(48*time.Hour).UnixMilli(), 10)), 2,
			"more than a day ahead"},
		{"restore bad id", restore("--id", "n 1"), 2, "--id"},
		{"restore bad raft addr", restore("--raft-addr", "nowhere"), 2, "--raft-addr"},
		{"restore unknown log store", append(restore(), "--raft-log-store", "leveldb"), 2, `--raft-log-store must be bolt or wal, got "leveldb"`},
		{"restore positional", append(restore(), "extra"), 2, "unexpected argument"},
		{"restore unknown flag", append(restore(), "--peers", "x"), 2, ""},
		{"restore corrupt file", restore("--snapshot", corrupt), 1, "SHA-256 mismatch"},
		{"restore invalid state", restore("--snapshot", badState), 1, "invalid snapshot"},
		{"restore missing file", restore("--snapshot", corrupt+".missing"), 1, "no such file"},
		{"restore non-empty dir", restore("--data-dir", nonEmpty), 1, "is not empty"},
		{"restore over a member", restore("--data-dir", seeded), 1, "is not empty"},
		{"inspect without dir", []string{"inspect"}, 2, "--data-dir is required"},
		{"inspect missing dir", []string{"inspect", "--data-dir", fresh}, 1, "no such file"},
		{"inspect not a data dir", []string{"inspect", "--data-dir", nonEmpty}, 1, "not a coordd member's data dir"},
		{"recover without peers file", []string{"recover", "--data-dir", seeded}, 2, "--peers-file is required"},
		{"recover missing peers file", []string{"recover", "--data-dir", seeded, "--peers-file", fresh}, 2, "no such file"},
		{"recover bad JSON", []string{"recover", "--data-dir", seeded, "--peers-file", peers(`{"id": "n1"}`)}, 2, "want a JSON array"},
		{"recover unknown field", []string{"recover", "--data-dir", seeded, "--peers-file", peers(`[{"id": "n1", "addr": "127.0.0.1:1"}]`)}, 2, "unknown field"},
		{"recover empty list", []string{"recover", "--data-dir", seeded, "--peers-file", peers(`[]`)}, 2, "lists no members"},
		{"recover bad address", []string{"recover", "--data-dir", seeded, "--peers-file", peers(`[{"id": "n1", "address": "x"}]`)}, 2, "address"},
		{"recover duplicate", []string{"recover", "--data-dir", seeded, "--peers-file",
			peers(`[{"id": "n1", "address": "127.0.0.1:1"}, {"id": "n1", "address": "127.0.0.1:2"}]`)}, 2, "duplicate"},
		{"recover without self", []string{"recover", "--data-dir", seeded, "--peers-file", peers(`[{"id": "n2", "address": "127.0.0.1:1"}]`)}, 1,
			"does not list this data dir's member n1 as a voter"},
		{"recover self as nonvoter", []string{"recover", "--data-dir", seeded, "--peers-file",
			peers(`[{"id": "n1", "address": "127.0.0.1:1", "non_voter": true},{"id": "n2", "address": "127.0.0.1:2"}]`)}, 1, "as a voter"},
		{"recover missing dir", []string{"recover", "--data-dir", fresh, "--peers-file", peers(`[{"id": "n1", "address": "127.0.0.1:1"}]`)}, 1, "does not exist"},
		{"recover not a data dir", []string{"recover", "--data-dir", nonEmpty, "--peers-file", peers(`[{"id": "n1", "address": "127.0.0.1:1"}]`)}, 1,
			"not a coordd member's data dir"},
	}
	before := dirListing(t, seeded) + dirListing(t, nonEmpty)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCmd(c.args...)
			if code != c.code || out != "" || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d with %q", code, out, errs, c.code, c.want)
			}
			if (c.code == 1 || strings.HasPrefix(c.name, "restore id floor") || strings.HasPrefix(c.name, "restore ts floor")) &&
				strings.Count(errs, "\n") != 1 {
				t.Fatalf("want one line, got %q", errs)
			}
			if _, err := os.Stat(fresh); !os.IsNotExist(err) {
				t.Fatalf("a refused command created %s", fresh)
			}
		})
	}
	if after := dirListing(t, seeded) + dirListing(t, nonEmpty); after != before {
		t.Fatalf("refused commands changed a data dir:\n%s\n---\n%s", before, after)
	}

	// A running member's data dir is refused by inspect and recover.
	st, err := raftnode.OpenStorage(raftnode.Config{ID: "n1", DataDir: seeded})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, args := range [][]string{
		{"inspect", "--data-dir", seeded},
		{"recover", "--data-dir", seeded, "--peers-file", peers(`[{"id": "n1", "address": "127.0.0.1:1"}]`)},
	} {
		code, out, errs := runCmd(args...)
		if code != 1 || out != "" || !strings.Contains(errs, "is in use by another process") {
			t.Fatalf("%v on a locked dir: exit %d, stdout %q, stderr %q", args, code, out, errs)
		}
	}
}
