package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/backup"
)

// TestSeedSmall runs the Milvus-max seeding path at a small size on real
// processes: a synthetic backup restored into the first member, simulated
// streaming nodes registered until every PChannel is assigned, and two
// members joining through raft. Then every member must be a voter of one
// configuration and caught up, and the leader's state must hold the seeded
// collections, PChannels and segments (its backup stream's summary).
func TestSeedSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three coordd processes")
	}
	dir := t.TempDir()
	bin := coorddBinary(t)
	cfg := config{profile: profile{Segments: 3000, VChannels: 400, PChannels: 16, Tombstones: 100}, Nodes: 4, Watchers: 4,
		ReadyLimit: 2 * time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep := &report{cfg: cfg, start: time.Now()}
	e, cleanup, err := seedCluster(ctx, cfg, filepath.Join(dir, "run"), bin, rep)
	defer cleanup()
	if err != nil {
		logs(t, dir)
		t.Fatal(err)
	}
	if len(rep.joins) != 2 {
		t.Fatalf("%d joins measured, want 2", len(rep.joins))
	}
	lead, st, err := e.leader(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Members) != 3 {
		t.Fatalf("leader %s lists %d members, want 3: %v", lead.id, len(st.Members), st.Members)
	}
	for _, m := range e.members {
		if _, err := m.waitReady(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	// The leader's state, as a backup stream summarizes it.
	f, err := os.Create(filepath.Join(dir, "after.snap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stream, err := coordpb.NewBackupClient(lead.conn).SaveSnapshot(ctx, &coordpb.SaveSnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for {
		c, err := stream.Recv()
		if err != nil {
			break
		}
		if _, err := f.Write(c.GetData()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	sum, err := backup.Summarize(f)
	if err != nil {
		t.Fatal(err)
	}
	// Every seeded collection and PChannel is there; segments only leave by
	// the dropped-segment retention (the seeded Dropped ones are old).
	if got := sum.Table("collection").Count; got != e.seed.Collections {
		t.Errorf("leader holds %d collections, seeded %d", got, e.seed.Collections)
	}
	if got := sum.Table("pchannel").Count; got != cfg.PChannels {
		t.Errorf("leader holds %d PChannels, seeded %d", got, cfg.PChannels)
	}
	healthy := cfg.Segments - e.seed.SegStates["SEGMENT_DROPPED"]
	if got := sum.Table("segment").Count; got < healthy || got > cfg.Segments {
		t.Errorf("leader holds %d segments, want %d..%d", got, healthy, cfg.Segments)
	}
	if got := sum.Table("streaming_node").Count; got != cfg.Nodes {
		t.Errorf("leader holds %d streaming nodes, registered %d", got, cfg.Nodes)
	}
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// coorddBinary builds coordd once per test binary (go build's cache makes
// it quick when nothing changed).
func coorddBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "coordd-scale-test-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "coordd")
		out, err := exec.Command("go", "build", "-tags", "hashicorpmetrics", "-o", builtBin, "github.com/coordd/coordd/cmd/coordd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build coordd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

// logs prints the members' logs' tails when the seeding failed.
func logs(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "run", "*.log"))
	for _, p := range matches {
		b, _ := os.ReadFile(p)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("%s:\n%s", p, b)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if builtBin != "" {
		os.RemoveAll(filepath.Dir(builtBin))
	}
	os.Exit(code)
}
