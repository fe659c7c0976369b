package raftnode_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
)

func readIdentity(t *testing.T, dir string) datadir.Identity {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, datadir.IdentityFile))
	if err != nil {
		t.Fatalf("identity record: %v", err)
	}
	var id datadir.Identity
	if err := json.Unmarshal(b, &id); err != nil {
		t.Fatalf("identity record: %v", err)
	}
	return id
}

// TestIdentityRecordIsWrittenAndKept: a new data dir gets an identity record
// before any raft state; the cluster ID is recorded once and survives a
// restart; recording another cluster ID is refused.
func TestIdentityRecordIsWrittenAndKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	n, err := raftnode.Open(openCfg(dir))
	if err != nil {
		t.Fatal(err)
	}
	id := readIdentity(t, dir)
	if id.MemberID != "n0" || len(id.Incarnation) != 32 || id.ClusterID != "" {
		t.Fatalf("new identity record %+v: want member n0, a 128-bit incarnation, no cluster ID", id)
	}
	if err := n.SetClusterID("c1"); err != nil {
		t.Fatal(err)
	}
	if err := n.SetClusterID("c1"); err != nil {
		t.Fatalf("recording the same cluster ID again: %v", err)
	}
	if err := n.SetClusterID("c2"); err == nil || !strings.Contains(err.Error(), "belongs to cluster c1") {
		t.Fatalf("recording another cluster ID: %v, want a refusal", err)
	}
	n.Shutdown()
	n, err = raftnode.Open(openCfg(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	if got := n.Identity(); got.ClusterID != "c1" || got.Incarnation != id.Incarnation {
		t.Fatalf("after restart: %+v, want cluster c1 and incarnation %s", got, id.Incarnation)
	}
	if _, err := os.Stat(filepath.Join(dir, datadir.IdentityFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary identity file left behind: %v", err)
	}
}

// TestWrongMemberIDIsRefused: a data dir created for n0 refuses --id n9.
func TestWrongMemberIDIsRefused(t *testing.T) {
	dir := t.TempDir()
	st, err := raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, err = raftnode.OpenStorage(raftnode.Config{ID: "n9", DataDir: dir})
	var we *datadir.WrongMemberError
	if !errors.As(err, &we) || !strings.Contains(err.Error(), "belongs to member n0") || !strings.Contains(err.Error(), "not --id n9") {
		t.Fatalf("OpenStorage with another ID: %v, want a WrongMemberError naming both IDs", err)
	}
	if got := readIdentity(t, dir); got.MemberID != "n0" {
		t.Fatalf("refusal rewrote the identity record: %+v", got)
	}
}

// TestDataDirInUseIsRefused: a second opener of a data dir in use gives up
// after the lock timeout with a clear error instead of waiting for ever.
func TestDataDirInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	st, err := raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	_, err = raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: dir})
	var ie *datadir.InUseError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "is in use by another process") {
		t.Fatalf("second OpenStorage: %v, want an InUseError", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("refusal took %v", d)
	}
	st.Close()
	st2, err := raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: dir})
	if err != nil {
		t.Fatalf("open after the first holder closed: %v", err)
	}
	st2.Close()
}

// TestLostRaftStateIsRefused: with the identity record present, a missing or
// emptied raft.db is refused; a member that never stored raft state (it
// crashed before bootstrapping or being replicated to) may start; the
// test-only switch lets the lost state through.
func TestLostRaftStateIsRefused(t *testing.T) {
	seed := seededDataDir(t)
	dir := copyDir(t, seed)
	if err := os.Remove(filepath.Join(dir, datadir.RaftDBFile)); err != nil {
		t.Fatal(err)
	}
	_, err := raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: dir})
	var le *datadir.LostStateError
	if !errors.As(err, &le) {
		t.Fatalf("OpenStorage without raft.db: %v, want a LostStateError", err)
	}
	cfg := openCfg(dir)
	cfg.TestOnlySkipIdentityCheck = true
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatalf("test-only skip: %v", err)
	}
	n.Shutdown()

	fresh := t.TempDir()
	st, err := raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: fresh})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = raftnode.OpenStorage(raftnode.Config{ID: "n0", DataDir: fresh})
	if err != nil {
		t.Fatalf("reopening a data dir that never held raft state: %v", err)
	}
	st.Close()
}
