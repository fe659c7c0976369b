package commands

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// FuzzDecode: DecodeEntry never panics on any input, and whatever it accepts
// re-encodes and decodes to the same commands.
func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	if err != nil {
		f.Fatal(err)
	}
	if len(files) == 0 {
		f.Fatal("no golden files to seed from")
	}
	for _, path := range files {
		f.Add(readGolden(f, path))
	}
	var batch []Command
	for _, typ := range registeredTypes() {
		batch = append(batch, sampleCommand(f, typ))
	}
	all, err := EncodeEntry(batch)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(all)
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff})
	f.Add(rawEnvelope(uint32(Ignorable|0x0777), 1, "skip", []byte("opaque")))
	f.Add(rawEnvelope(0x0777, 1, "", nil))
	f.Add(rawEnvelope(uint32(TypeReserveIDs), 0, "", []byte{0x08, 0x01}))
	f.Add(rawEnvelope(uint32(TypeReserveIDs), 2, "", []byte{0x08, 0x01}))
	f.Add(rawEnvelope(uint32(TypeUpsertMember), 1, "id", []byte{0x0a, 0x03, 0x0a, 0x01, 'a'}))
	// Channel commands: the 0x0100 block, one batch, and bodies the
	// validators (not the decoder) must refuse.
	var channelBatch []Command
	for _, typ := range registeredTypes() {
		if typ >= TypeInitStreaming {
			channelBatch = append(channelBatch, sampleCommand(f, typ))
		}
	}
	if data, err := EncodeEntry(channelBatch); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	for _, body := range []proto.Message{
		&logpb.InitStreaming{ClusterId: "c"},
		&logpb.AddPChannels{Pchannels: []string{"p_01", "p_1", "p_1"}},
		&logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{{Pchannel: "p_0", NodeId: 1, Mode: 7, ExpectedTerm: -1}}},
		&logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{{Pchannel: "p_0", Term: 0}}},
		&logpb.MarkPChannelsUnavailable{},
		&logpb.RecordAssignFailure{},
		&logpb.RegisterStreamingNode{Address: "h:0", Incarnation: strings.Repeat("i", 129), ReplaceNodeId: 1 << 63},
		&logpb.MarkStreamingNodeDown{Epoch: 1 << 63},
		&logpb.SetStreamingNodeDrain{Reason: strings.Repeat("r", 1025)},
		&logpb.AllocVirtualChannels{CollectionId: -1, Count: 1 << 31},
		&logpb.DropVirtualChannels{},
		&logpb.UpdateReplicateConfiguration{},
		&logpb.ResetReplicateRole{Reason: " "},
		&logpb.UpdateReplicateConfiguration{Config: &logpb.ReplicateConfiguration{
			Clusters: []*logpb.ReplicateCluster{{ClusterId: "a"}, {ClusterId: "a", Pchannels: []string{"x"}}},
			Topology: []*logpb.ReplicateTopology{{SourceClusterId: "a", TargetClusterId: "a"}, {}},
		}},
	} {
		c := MustNew(body)
		f.Add(rawEnvelope(uint32(c.Type), 1, "chan", mustMarshalTB(f, body)))
	}
	f.Add(rawEnvelope(uint32(TypeAssignPChannels), 2, "", nil))                                     // newer version
	f.Add(rawEnvelope(uint32(TypeInitStreaming), 1, "", []byte{0x12, 0x02, 0xff, 0xfe}))            // pchannel not UTF-8
	f.Add(rawEnvelope(uint32(TypeRecordAssignFailure), 1, "", []byte{0x0a, 0x05, 0x0a, 0x03, 'p'})) // truncated nested message
	f.Add(rawEnvelope(0x010D, 1, "", nil))                                                          // next unassigned number in the block

	// Broadcaster commands: the 0x0200 block as one batch, and bodies the
	// validators (not the decoder) must refuse.
	var broadcastBatch []Command
	for _, typ := range registeredTypes() {
		if typ >= TypeCreateBroadcast {
			broadcastBatch = append(broadcastBatch, sampleCommand(f, typ))
		}
	}
	if data, err := EncodeEntry(broadcastBatch); err == nil {
		f.Add(data)
	} else {
		f.Fatal(err)
	}
	for _, body := range []proto.Message{
		&logpb.CreateBroadcast{},
		&logpb.CreateBroadcast{MessageType: "a-b", Vchannels: []string{"p_0_vcchan"}},
		&logpb.CreateBroadcast{MessageType: "T", Vchannels: []string{"p_0_vcchan", "p_0_vcchan"},
			ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_CLUSTER, Key: "x"}, {Domain: 9}}},
		&logpb.CreateBroadcast{MessageType: "T", Vchannels: []string{"p_0"}, IdempotencyKey: "db/01/1:a"},
		&logpb.CreateBroadcast{MessageType: "T", Vchannels: []string{"p_0"}, IdempotencyKey: "cluster/0/2:a"},
		&logpb.CreateBroadcast{MessageType: "T", Vchannels: []string{"p_0"}, IdempotencyKey: "raw"},
		&logpb.CreateBroadcast{MessageType: vocab.MsgCreateCollection, Vchannels: []string{"p_0_vcchan"}, Payload: []byte{0xff}},
		&logpb.AckBroadcast{BroadcastId: 1, Checkpoints: []*logpb.VChannelCheckpoint{{Vchannel: "p_0", Term: 0}}},
		&logpb.AckBroadcast{Checkpoints: []*logpb.VChannelCheckpoint{{Vchannel: "p_01", Term: -1, TimeTick: 1}}},
		&logpb.CompleteBroadcast{},
		&logpb.AbandonBroadcast{BroadcastId: 1},
		&logpb.AbandonBroadcast{BroadcastId: 1, Reason: strings.Repeat("r", 1025)},
		&logpb.PruneBroadcastTombstones{MaxCount: 1, MaxLifetimeMs: -1},
	} {
		c := MustNew(body)
		f.Add(rawEnvelope(uint32(c.Type), 1, "bc", mustMarshalTB(f, body)))
	}
	f.Add(rawEnvelope(uint32(TypeCreateBroadcast), 2, "", nil))                                        // newer version
	f.Add(rawEnvelope(uint32(TypeCreateBroadcast), 1, "", []byte{0x0a, 0x02, 0xff, 0xfe}))             // message type not UTF-8
	f.Add(rawEnvelope(uint32(TypeAckBroadcast), 1, "", []byte{0x12, 0x06, 0x0a, 0x04, 'p', '_', '0'})) // truncated checkpoint
	f.Add(rawEnvelope(0x0206, 1, "", nil))                                                             // next unassigned number in the block
	for _, seed := range segmentDecodeSeeds(f) {
		f.Add(seed)
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cmds, err := DecodeEntry(data)
		if err != nil {
			if cmds != nil {
				t.Fatalf("DecodeEntry returned commands with error %v", err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownType) &&
				!errors.Is(err, ErrNewerVersion) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("DecodeEntry error %v is not one of the codec's error kinds", err)
			}
			return
		}
		if len(cmds) == 0 || len(cmds) > MaxCommandsPerEntry {
			t.Fatalf("DecodeEntry accepted %d commands", len(cmds))
		}
		for i, c := range cmds {
			if c.Body == nil && !c.Type.IsIgnorable() {
				t.Fatalf("command %d: nil body for non-ignorable %s", i, c.Type)
			}
			if c.Body != nil {
				if typ, ok := TypeOf(c.Body); !ok || typ != c.Type {
					t.Fatalf("command %d: body %T does not match type %s", i, c.Body, c.Type)
				}
			}
			// Validate must not panic on anything the decoder lets through,
			// and its only verdict is ErrInvalid.
			if err := Validate(c); err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("command %d: Validate error %v does not wrap ErrInvalid", i, err)
			}
		}
		again, err := EncodeEntry(cmds)
		if err != nil {
			t.Fatalf("EncodeEntry of decoded commands: %v", err)
		}
		cmds2, err := DecodeEntry(again)
		if err != nil {
			t.Fatalf("DecodeEntry of re-encoded entry: %v", err)
		}
		if d := diffCommands(cmds2, cmds); d != "" {
			t.Fatalf("re-encoded entry decodes differently: %s", d)
		}
	})
}

func allowedIDByte(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
}

// FuzzValidate: the validators never panic, accept only what their contract
// allows, and Validate agrees with the per-field validators.
func FuzzValidate(f *testing.F) {
	f.Add("node-1", "127.0.0.1:7001", "", uint64(1), int64(1))
	f.Add("", "", "", uint64(0), int64(0))
	f.Add("a b", "[::1]:0", "host:65536", uint64(0), int64(-1))
	f.Add("ü", "[::1]:80", "[fe80::1%eth0]:443", uint64(MaxReserveIDs+1), int64(1)<<46)
	f.Add(strings.Repeat("x", 65), ":80", "host:+80", uint64(MaxReserveIDs), int64(1)<<46-1)
	f.Fuzz(func(t *testing.T, id, addr, addr2 string, count uint64, limit int64) {
		idErr := vocab.ValidateMemberID(id)
		if idErr == nil {
			if len(id) == 0 || len(id) > vocab.MaxMemberIDBytes {
				t.Fatalf("accepted id of %d bytes", len(id))
			}
			for i := 0; i < len(id); i++ {
				if !allowedIDByte(id[i]) {
					t.Fatalf("accepted id %q with byte %q", id, id[i])
				}
			}
		} else if !errors.Is(idErr, vocab.ErrInvalid) {
			t.Fatalf("vocab.ValidateMemberID error %v does not wrap ErrInvalid", idErr)
		}

		for _, required := range []bool{true, false} {
			err := vocab.ValidateAddr("addr", addr, required)
			if err != nil {
				if !errors.Is(err, vocab.ErrInvalid) {
					t.Fatalf("vocab.ValidateAddr error %v does not wrap ErrInvalid", err)
				}
				continue
			}
			if addr == "" {
				if required {
					t.Fatal("accepted an empty required address")
				}
				continue
			}
			host, port, err := net.SplitHostPort(addr)
			if err != nil || host == "" || len(addr) > 255 {
				t.Fatalf("accepted address %q (split err %v, host %q)", addr, err, host)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				t.Fatalf("accepted address %q with port %q", addr, port)
			}
		}

		m := &logpb.Member{Id: id, RaftAddr: addr, GrpcAddr: addr2, HttpAddr: addr2}
		upsertErr := Validate(MustNew(&logpb.UpsertMember{Member: m}))
		wantOK := idErr == nil && vocab.ValidateAddr("raft_addr", addr, true) == nil && vocab.ValidateAddr("grpc_addr", addr2, false) == nil
		if (upsertErr == nil) != wantOK {
			t.Fatalf("Validate(UpsertMember %v) = %v, but field validators say ok=%v", m, upsertErr, wantOK)
		}
		if err := Validate(MustNew(&logpb.RemoveMember{Id: id})); (err == nil) != (idErr == nil) {
			t.Fatalf("Validate(RemoveMember %q) = %v, vocab.ValidateMemberID = %v", id, err, idErr)
		}
		leErr := Validate(MustNew(&logpb.LeaderEstablished{Term: count, LeaderId: id}))
		if (leErr == nil) != (count > 0 && idErr == nil) {
			t.Fatalf("Validate(LeaderEstablished term %d id %q) = %v", count, id, leErr)
		}
		resErr := Validate(MustNew(&logpb.ReserveIDs{Count: count}))
		if (resErr == nil) != (count >= 1 && count <= MaxReserveIDs) {
			t.Fatalf("Validate(ReserveIDs %d) = %v", count, resErr)
		}
		tsoErr := Validate(MustNew(&logpb.ExtendTSOWindow{LimitPhysicalMs: limit}))
		if (tsoErr == nil) != (limit > 0 && limit < 1<<46) {
			t.Fatalf("Validate(ExtendTSOWindow %d) = %v", limit, tsoErr)
		}
		for _, err := range []error{upsertErr, leErr, resErr, tsoErr} {
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate error %v does not wrap ErrInvalid", err)
			}
		}
	})
}

func mustMarshalTB(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
