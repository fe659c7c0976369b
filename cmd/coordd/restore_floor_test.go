package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/vocab"
)

// applyBodies applies each body as its own entry (term 2) and returns the
// last result.
func applyBodies(t *testing.T, st *fsm.State, bodies ...proto.Message) (*fsm.State, *logpb.Result) {
	t.Helper()
	var last *logpb.Result
	for _, b := range bodies {
		next, res, err := st.ApplyCommands(st.AppliedIndex()+1, commands.MustNew(b))
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Rejection != nil {
			t.Fatalf("%T: %v", b, res[0].Rejection)
		}
		st, last = next, res[0]
	}
	return st, last
}

// writeBackupOf writes st as a backup file (index = st's applied index,
// term 2).
func writeBackupOf(t *testing.T, st *fsm.State) string {
	t.Helper()
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
	w, err := backup.NewWriter(f, backup.Header{ClusterID: "oldcluster", Index: st.AppliedIndex(), Term: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(body.Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue #20 R1, restored IDs reissued, end to end through `coordd restore`: a backup
// is taken, the old cluster goes on and creates a segment, and the
// restored cluster creates one on another VChannel. Before, the restored
// state handed out the same segment ID again. Now restore requires
// --id-floor (the operator gives the old cluster's next ID, as the docs
// say: `coordd inspect` of its members), and writes the floor as the
// first entry after the snapshot, so the restored cluster's IDs start
// above everything the old one handed out; its TSO limit starts above the
// restoring machine's clock.
func TestAuditRestoreReissuesIDs(t *testing.T) {
	p0, p1 := vocab.PChannelName("dml", 0), vocab.PChannelName("dml", 1)
	st, _ := applyBodies(t, fsm.New(),
		&logpb.LeaderEstablished{Term: 2, LeaderId: "old1"},
		&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{p0, p1}},
		&logpb.AllocVirtualChannels{CollectionId: 100, Count: 2},
		&logpb.RegisterStreamingNode{Address: "127.0.0.1:9001", Incarnation: "a"},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: p0, NodeId: 1, ExpectedTerm: 1}, {Pchannel: p1, NodeId: 1, ExpectedTerm: 1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: p0, Term: 2}, {Pchannel: p1, Term: 2}}})
	create := func(vch string) *logpb.CreateSegment {
		return &logpb.CreateSegment{CollectionId: 100, PartitionId: 1, Vchannel: vch, NodeId: 1, PchannelTerm: 2}
	}
	v0, v1 := vocab.VChannelName(p0, 100, 0), vocab.VChannelName(p1, 100, 1)
	st, _ = applyBodies(t, st, create(v0))
	file := writeBackupOf(t, st)                                               // the backup
	old, res := applyBodies(t, st, create(v0), &logpb.ReserveIDs{Count: 1000}) // the old cluster goes on
	oldSeg := res.GetIdRange().GetFirst() - 1
	if _, r := applyBodies(t, st, create(v0)); r.GetSegments().GetIds()[0] != int64(oldSeg) {
		t.Fatalf("fixture: the old cluster's segment is %v, want %d", r, oldSeg)
	}

	dir := filepath.Join(t.TempDir(), "n1")
	floor := strconv.FormatUint(old.NextID(), 10) // what `coordd inspect` of an old member reports
	if code, out, errs := runCmd("restore", "--snapshot", file, "--data-dir", dir, "--id", "n1", "--raft-addr", "127.0.0.1:7101", "--id-floor", floor); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
	}
	rep, err := datadir.InspectDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	restored, res := applyBodies(t, rep.State, create(v1)) // the restored cluster
	if newSeg := res.GetSegments().GetIds()[0]; uint64(newSeg) < old.NextID() {
		t.Errorf("the restored state creates segment %d on %s; the old cluster had handed out every ID below %d after the backup (segment %d on %s)",
			newSeg, v1, old.NextID(), oldSeg, v0)
	}
	if restored.TSOLimitPhysicalMs() <= st.TSOLimitPhysicalMs() {
		t.Errorf("TSO limit %d not raised above the backup's %d", restored.TSOLimitPhysicalMs(), st.TSOLimitPhysicalMs())
	}
}
