package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// populated is a state with something in every part of the snapshot.
func populated(t *testing.T) *State {
	t.Helper()
	return build(t,
		leaderEstablished(4, "n2", withProposedAt(12345), withTerm(4)),
		cmd(&logpb.UpsertMember{Member: &logpb.Member{Id: "n2", RaftAddr: "h:2", GrpcAddr: "h:12", HttpAddr: "h:22"}}),
		upsertMember("n1", "h:1"),
		extendTSO(777, withRequestID("tso-1")),
		reserveIDs(42, withRequestID("ids-1")),
		reserveIDs(0, withRequestID("bad-1")),
		// Channel records of every kind: nodes in every state, pchannels in
		// every state with histories, collections, a replication config.
		register(addr1, "i1"),
		register(addr2, "i2", withRequestID("reg-2")),
		register(addr3, "i3"),
		initStreaming(clusterID, p0, p1, p2, p3),
		assign(asg(p0, 1, 1), asg(p1, 2, 1), asgMode(p2, 3, ro, 1)),
		done(pt(p0, 2), pt(p1, 2)),
		unavailable(ptr(p1, 2, "broken")),
		assign(asg(p2, 1, 2)),
		assignFailed(p2, 3, "deadline exceeded"),
		allocV(449326211, 2),
		allocV(7, 1),
		replicate([]*logpb.ReplicateCluster{rcluster(clusterID, p0, p1, p2), rcluster("dr", "d_0", "d_1", "d_2")}, edge(clusterID, "dr")),
		drain(2, true, "upgrade"),
		markDown(3, 0, "ttl"),
	)
}

func TestSnapshotRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		state func(t *testing.T) *State
	}{
		{"empty", func(*testing.T) *State { return New() }},
		{"populated", populated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.state(t)
			data := snapshotBytes(t, s)
			if !bytes.HasPrefix(data, []byte(snapshotMagic)) {
				t.Fatalf("snapshot does not start with the magic: %q", data[:8])
			}
			r, err := ReadSnapshot(bytes.NewReader(data))
			if err != nil {
				t.Fatalf("ReadSnapshot: %v", err)
			}
			if again := snapshotBytes(t, r); !bytes.Equal(again, data) {
				t.Fatalf("snapshot of the restored state differs:\n got %x\nwant %x", again, data)
			}
			gotID, gotAt := r.EstablishedLeader()
			wantID, wantAt := s.EstablishedLeader()
			if r.AppliedIndex() != s.AppliedIndex() || r.NextID() != s.NextID() ||
				r.TSOLimitPhysicalMs() != s.TSOLimitPhysicalMs() || r.EstablishedTerm() != s.EstablishedTerm() ||
				gotID != wantID || gotAt != wantAt || r.DedupLen() != s.DedupLen() {
				t.Fatal("restored accessors differ from the original")
			}
			if !sameChannelView(r, s) {
				t.Fatal("restored channel view differs from the original")
			}
			for _, p := range pchannelNames(s) {
				if r.VChannelCount(p) != s.VChannelCount(p) || r.AvailableInReplication(p) != s.AvailableInReplication(p) {
					t.Fatalf("%s: restored count/availability differ", p)
				}
			}
			if r.IsPrimary() != s.IsPrimary() || r.CChannel() != s.CChannel() || r.DeltaFloor() != s.DeltaFloor() {
				t.Fatal("restored role, cchannel or delta floor differ")
			}
			gm, wm := r.Members(), s.Members()
			if len(gm) != len(wm) {
				t.Fatalf("restored %d members, want %d", len(gm), len(wm))
			}
			for i := range gm {
				if !proto.Equal(gm[i], wm[i]) {
					t.Fatalf("member %d: %v, want %v", i, gm[i], wm[i])
				}
			}
		})
	}
}

// record encodes one length-delimited snapshot record.
func record(t *testing.T, r *logpb.SnapshotRecord) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := protodelim.MarshalTo(&buf, r); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func header(version uint32, applied, count uint64) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Header{Header: &logpb.SnapshotHeader{
		FormatVersion: version, AppliedIndex: applied, RecordCount: count}}}
}

func allocator(tso int64, next uint64) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Allocator{Allocator: &logpb.AllocatorState{
		TsoLimitPhysicalMs: tso, NextId: next}}}
}

func dedupRecord(id string) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Dedup{Dedup: &logpb.DedupRecord{RequestId: id, Index: 1}}}
}

func metaRecord(m *logpb.ChannelsMeta) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_ChannelsMeta{ChannelsMeta: m}}
}

// nodesMeta is a channels meta record whose next node id is next.
func nodesMeta(next uint64) *logpb.SnapshotRecord {
	return metaRecord(&logpb.ChannelsMeta{NextNodeId: next})
}

func pchRecord(p *logpb.PChannelRecord) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Pchannel{Pchannel: p}}
}

func nodeRecord(id uint64, addr string, state logpb.NodeState) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_StreamingNode{StreamingNode: &logpb.StreamingNodeRecord{
		Id: id, Address: addr, Incarnation: "i", State: state}}}
}

func collRecord(id int64, vchannels ...string) *logpb.SnapshotRecord {
	return &logpb.SnapshotRecord{Record: &logpb.SnapshotRecord_Collection{Collection: &logpb.CollectionVChannels{
		CollectionId: id, Vchannels: vchannels}}}
}

// stream assembles a snapshot from the magic and records.
func stream(t *testing.T, recs ...*logpb.SnapshotRecord) []byte {
	out := []byte(snapshotMagic)
	for _, r := range recs {
		out = append(out, record(t, r)...)
	}
	return out
}

func TestReadSnapshotRejects(t *testing.T) {
	good := snapshotBytes(t, populated(t))
	tests := []struct {
		name    string
		data    []byte
		wantMsg string
	}{
		{"empty stream", nil, "read magic"},
		{"short magic", []byte("COORD"), "read magic"},
		{"bad magic", append([]byte("COORDSN2"), good[8:]...), "bad magic"},
		{"magic only", []byte(snapshotMagic), "read header"},
		{"trailing byte", append(append([]byte{}, good...), 0x00), "trailing data"},
		{"trailing garbage", append(append([]byte{}, good...), 0xff, 0xff), "trailing data"},
		{"trailing record", append(append([]byte{}, good...), record(t, allocator(1, 2))...), "trailing data"},
		{"format version 0", stream(t, header(0, 1, 1), allocator(1, 2)), "unsupported format version"},
		{"format version 2", stream(t, header(snapshotFormatVersion+1, 1, 1), allocator(1, 2)), "unsupported format version"},
		{"no header", stream(t, allocator(1, 2)), "missing header"},
		{"fewer records than the header says", stream(t, header(1, 1, 2), allocator(1, 2)), "record 2 of 2"},
		{"second header", stream(t, header(1, 1, 1), header(1, 1, 0)), "unexpected kind"},
		{"empty record", stream(t, header(1, 1, 1), &logpb.SnapshotRecord{}), "unexpected kind"},
		{"next id 0", stream(t, header(1, 1, 1), allocator(1, 0)), "next global id is 0"},
		{"negative tso", stream(t, header(1, 1, 1), allocator(-1, 1)), "negative"},
		{"duplicate request id", stream(t, header(1, 1, 2), dedupRecord("x"), dedupRecord("x")), "request-id table"},
		{"oversized record", append([]byte(snapshotMagic), 0xff, 0xff, 0xff, 0xff, 0x0f), "read header"},
		// Channel records that break an invariant.
		{"assigned with histories", stream(t, header(1, 1, 2), nodesMeta(3), pchRecord(&logpb.PChannelRecord{
			Name: p0, Term: 3, NodeId: 1, State: stAssigned, Histories: []*logpb.PChannelHistory{hist(2, 2, rw)}})), "ASSIGNED with 1 histories"},
		{"history term not below the current term", stream(t, header(1, 1, 2), nodesMeta(3), pchRecord(&logpb.PChannelRecord{
			Name: p0, Term: 3, NodeId: 1, State: stAssigning, Histories: []*logpb.PChannelHistory{hist(3, 2, rw)}})), "not below current term"},
		{"two histories for one placement", stream(t, header(1, 1, 2), nodesMeta(3), pchRecord(&logpb.PChannelRecord{
			Name: p0, Term: 4, NodeId: 1, State: stAssigning, Histories: []*logpb.PChannelHistory{hist(2, 2, rw), hist(3, 2, rw)}})), "two histories"},
		{"pchannel term 0", stream(t, header(1, 1, 1), pchRecord(&logpb.PChannelRecord{Name: p0, State: stUninit})), "term 0"},
		{"assigning without a node", stream(t, header(1, 1, 1), pchRecord(&logpb.PChannelRecord{Name: p0, Term: 2, State: stAssigning})), "without a node"},
		{"cchannel on a missing pchannel", stream(t, header(1, 1, 2), metaRecord(&logpb.ChannelsMeta{
			Initialized: true, ClusterId: clusterID, Cchannel: vocab.CChannelName(p1), NextNodeId: 1}),
			pchRecord(&logpb.PChannelRecord{Name: p0, Term: 1, State: stUninit})), "bound to a missing pchannel"},
		{"next node id 0", stream(t, header(1, 1, 1), nodesMeta(0)), "next streaming node id is 0"},
		{"node id not below next node id", stream(t, header(1, 1, 2), nodesMeta(2), nodeRecord(2, addr1, nodeUp)), "streaming node record 2"},
		{"node id 0", stream(t, header(1, 1, 2), nodesMeta(2), nodeRecord(0, addr1, nodeUp)), "streaming node record 0"},
		{"two live nodes at one address", stream(t, header(1, 1, 3), nodesMeta(3), nodeRecord(1, addr1, nodeUp), nodeRecord(2, addr1, nodeDraining)), "both live at"},
		{"two vchannels of a collection on one pchannel", stream(t, header(1, 1, 1), collRecord(5, vocab.VChannelName(p0, 5, 0), vocab.VChannelName(p0, 5, 1))), "two vchannels on pchannel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ReadSnapshot(bytes.NewReader(tt.data))
			if !errors.Is(err, errSnapshot) {
				t.Fatalf("ReadSnapshot error = %v, want errSnapshot", err)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("ReadSnapshot error %q does not mention %q", err, tt.wantMsg)
			}
			if s != nil {
				t.Fatal("ReadSnapshot returned a state with an error")
			}
		})
	}
}

// TestReadSnapshotRejectsEveryTruncation: no proper prefix of a snapshot is
// itself a valid snapshot.
func TestReadSnapshotRejectsEveryTruncation(t *testing.T) {
	good := snapshotBytes(t, populated(t))
	if _, err := ReadSnapshot(bytes.NewReader(good)); err != nil {
		t.Fatalf("the full snapshot must be accepted: %v", err)
	}
	for n := 0; n < len(good); n++ {
		if s, err := ReadSnapshot(bytes.NewReader(good[:n])); !errors.Is(err, errSnapshot) || s != nil {
			t.Fatalf("prefix of %d/%d bytes: state %v, error %v; want errSnapshot", n, len(good), s != nil, err)
		}
	}
}

// TestStateImmutable: a *State held by a reader never changes, whatever is
// applied to it or restored next to it.
func TestStateImmutable(t *testing.T) {
	held := populated(t)
	want := snapshotBytes(t, held)
	members := held.Members()
	n1, _ := held.Member("n1")
	n1Copy := proto.Clone(n1)

	// Derive many newer states from the held one, touching every part.
	s := held
	for i := 0; i < 20; i++ {
		var err error
		s, _, err = s.ApplyCommands(s.AppliedIndex()+1,
			leaderEstablished(uint64(5+i), "n3"),
			upsertMember("n1", "changed:1"),
			removeMember("n2"),
			extendTSO(int64(1000+i)),
			reserveIDs(5, withRequestID("ids-1")),
			reserveIDs(5, withRequestID("more-"+string(rune('a'+i)))),
		)
		if err != nil {
			t.Fatal(err)
		}
	}
	// Apply failures on the held state, too.
	if _, _, err := held.Apply(held.AppliedIndex(), []byte{0x01}); err == nil {
		t.Fatal("Apply at the applied index succeeded")
	}
	if _, _, err := held.Apply(held.AppliedIndex()+1, []byte{0xff}); err == nil {
		t.Fatal("Apply of garbage succeeded")
	}

	// Restore a different snapshot and keep applying to the restored state.
	r, err := ReadSnapshot(bytes.NewReader(snapshotBytes(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.ApplyCommands(r.AppliedIndex()+1, upsertMember("n1", "again:1"), reserveIDs(1)); err != nil {
		t.Fatal(err)
	}

	if got := snapshotBytes(t, held); !bytes.Equal(got, want) {
		t.Fatal("the held state changed")
	}
	if got := held.Members(); len(got) != len(members) || len(got) != 2 {
		t.Fatalf("held state has %d members, had %d", len(got), len(members))
	}
	if m, _ := held.Member("n1"); !proto.Equal(m, n1Copy) || !proto.Equal(n1, n1Copy) {
		t.Fatalf("held member record changed: %v", m)
	}
	if newer, _ := s.Member("n1"); newer.RaftAddr != "changed:1" {
		t.Fatalf("derived state has %v", newer)
	}
}
