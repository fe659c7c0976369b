package commands

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// fixedSamples holds one hand-written, valid body per registered type. The
// golden files are encodings of these, so they must never change once a type
// is released (add fields to new samples, never to these). A registered type
// without a sample fails TestRegistryHasSamples.
var fixedSamples = map[Type]func() proto.Message{
	TypeLeaderEstablished: func() proto.Message { return &logpb.LeaderEstablished{Term: 7, LeaderId: "node-1"} },
	TypeUpsertMember: func() proto.Message {
		return &logpb.UpsertMember{Member: &logpb.Member{
			Id: "node-2", RaftAddr: "127.0.0.1:7001", GrpcAddr: "127.0.0.1:7101", HttpAddr: "127.0.0.1:7201",
		}}
	},
	TypeRemoveMember:    func() proto.Message { return &logpb.RemoveMember{Id: "node-3"} },
	TypeExtendTSOWindow: func() proto.Message { return &logpb.ExtendTSOWindow{LimitPhysicalMs: 1700000003000} },
	TypeReserveIDs:      func() proto.Message { return &logpb.ReserveIDs{Count: 1000} },
	TypeRaiseAllocatorFloors: func() proto.Message {
		return &logpb.RaiseAllocatorFloors{NextId: 1 << 40, TsoLimitPhysicalMs: 1_795_000_000_000}
	},

	// 0x0100.. channel management. Every field of every body is set, so the
	// golden files pin each field number and wire type.
	TypeInitStreaming: func() proto.Message {
		return &logpb.InitStreaming{ClusterId: "by-dev", Pchannels: []string{"by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"}}
	},
	TypeAddPChannels: func() proto.Message {
		return &logpb.AddPChannels{Pchannels: []string{"by-dev-rootcoord-dml_2", "by-dev-rootcoord-dml_3"}}
	},
	TypeAssignPChannels: func() proto.Message {
		return &logpb.AssignPChannels{Assignments: []*logpb.PChannelAssignment{
			{Pchannel: "by-dev-rootcoord-dml_0", NodeId: 3, Mode: logpb.AccessMode_ACCESS_RO, ExpectedTerm: 4},
			{Pchannel: "by-dev-rootcoord-dml_1", NodeId: 5, Mode: logpb.AccessMode_ACCESS_RW, ExpectedTerm: 1},
		}}
	},
	TypeAssignPChannelsDone: func() proto.Message {
		return &logpb.AssignPChannelsDone{Channels: []*logpb.PChannelTerm{
			{Pchannel: "by-dev-rootcoord-dml_0", Term: 5, Reason: "opened"},
			{Pchannel: "by-dev-rootcoord-dml_1", Term: 2},
		}}
	},
	TypeMarkPChannelsUnavailable: func() proto.Message {
		return &logpb.MarkPChannelsUnavailable{Channels: []*logpb.PChannelTerm{
			{Pchannel: "by-dev-rootcoord-dml_0", Term: 5, Reason: "wrong streaming node"},
		}}
	},
	TypeRecordAssignFailure: func() proto.Message {
		return &logpb.RecordAssignFailure{Channel: &logpb.PChannelTerm{
			Pchannel: "by-dev-rootcoord-dml_1", Term: 2, Reason: "deadline exceeded"}}
	},
	TypeRegisterStreamingNode: func() proto.Message {
		return &logpb.RegisterStreamingNode{Address: "10.0.0.7:22222", ResourceGroup: "rg-1", Incarnation: "boot-8f3a", ReplaceNodeId: 2, BoundNode: 7}
	},
	TypeMarkStreamingNodeDown: func() proto.Message {
		return &logpb.MarkStreamingNodeDown{NodeId: 3, Epoch: 41, Reason: "heartbeat ttl expired"}
	},
	TypeSetStreamingNodeDrain: func() proto.Message {
		return &logpb.SetStreamingNodeDrain{NodeId: 3, Draining: true, Reason: "operator"}
	},
	TypeAllocVirtualChannels: func() proto.Message {
		return &logpb.AllocVirtualChannels{CollectionId: 449326211, Count: 2}
	},
	TypeDropVirtualChannels: func() proto.Message {
		return &logpb.DropVirtualChannels{CollectionId: 449326211}
	},
	TypeUpdateReplicateConfiguration: func() proto.Message {
		return &logpb.UpdateReplicateConfiguration{Config: &logpb.ReplicateConfiguration{
			Clusters: []*logpb.ReplicateCluster{
				{ClusterId: "by-dev", Pchannels: []string{"by-dev-rootcoord-dml_0", "by-dev-rootcoord-dml_1"}},
				{ClusterId: "backup", Pchannels: []string{"backup-dml_0", "backup-dml_1"}},
			},
			Topology: []*logpb.ReplicateTopology{{SourceClusterId: "by-dev", TargetClusterId: "backup"}},
		}}
	},
	TypeResetReplicateRole: func() proto.Message {
		return &logpb.ResetReplicateRole{Reason: "primary site lost"}
	},

	// 0x0200.. broadcaster. Every field set, as for the channel block.
	TypeCreateBroadcast: func() proto.Message {
		return &logpb.CreateBroadcast{
			MessageType: vocab.MsgCreateCollection,
			// CreateCollectionPayload{collection_id: 449326211, shards: 2},
			// spelled out so the golden file does not depend on a marshaller.
			Payload: []byte{0x08, 0x83, 0xd9, 0xa0, 0xd6, 0x01, 0x10, 0x02},
			ResourceKeys: []*logpb.ResourceKey{
				{Domain: logpb.ResourceDomain_RK_DB_NAME, Key: "default", Shared: true},
				{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "default:books"},
			},
			Vchannels:       []string{"by-dev-rootcoord-dml_0_vcchan", "by-dev-rootcoord-dml_1_449326211v0", "by-dev-rootcoord-dml_2_449326211v1"},
			AckSyncUp:       true,
			IdempotencyKey:  "db/1/12:create-books",
			AfterBroadcasts: []uint64{449326299},
		}
	},
	TypeAckBroadcast: func() proto.Message {
		return &logpb.AckBroadcast{BroadcastId: 449326300, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: "by-dev-rootcoord-dml_0_vcchan", Term: 3, Offset: 1042, TimeTick: 449326301000000},
			{Vchannel: "by-dev-rootcoord-dml_1_449326211v0", Term: 1, Offset: 7, TimeTick: 449326301000001},
		}, FromNode: 12, FromEpoch: 449326290}
	},
	TypeCompleteBroadcast: func() proto.Message {
		return &logpb.CompleteBroadcast{BroadcastId: 449326300, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: "by-dev-rootcoord-dml_0_vcchan", Term: 3, Offset: 1043, TimeTick: 449326302000000},
		}}
	},
	TypeAbandonBroadcast: func() proto.Message {
		return &logpb.AbandonBroadcast{BroadcastId: 449326300, Reason: "callback keeps failing: collection exists"}
	},
	TypePruneBroadcastTombstones: func() proto.Message {
		return &logpb.PruneBroadcastTombstones{MaxCount: 8192, MaxLifetimeMs: 86400000}
	},
}

// TestFixedSamplesSetEveryField: the samples of the channel commands set
// every field (in at least one element of a repeated message), so their
// golden files pin the field number and wire type of each one.
func TestFixedSamplesSetEveryField(t *testing.T) {
	for _, typ := range registeredTypes() {
		if typ < TypeInitStreaming {
			continue // released before this check; their samples are frozen
		}
		set := map[string]bool{}
		var walk func(m protoreflect.Message, path string)
		walk = func(m protoreflect.Message, path string) {
			m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
				name := path + "." + string(fd.Name())
				set[name] = true
				switch {
				case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
					for j := 0; j < v.List().Len(); j++ {
						walk(v.List().Get(j).Message(), name)
					}
				case !fd.IsList() && fd.Kind() == protoreflect.MessageKind:
					walk(v.Message(), name)
				}
				return true
			})
		}
		var schema func(md protoreflect.MessageDescriptor, path string, depth int) []string
		schema = func(md protoreflect.MessageDescriptor, path string, depth int) []string {
			var out []string
			for i := 0; i < md.Fields().Len(); i++ {
				fd := md.Fields().Get(i)
				name := path + "." + string(fd.Name())
				out = append(out, name)
				if fd.Kind() == protoreflect.MessageKind && depth < 4 {
					out = append(out, schema(fd.Message(), name, depth+1)...)
				}
			}
			return out
		}
		m := fixedSamples[typ]().ProtoReflect()
		walk(m, typ.String())
		for _, f := range schema(m.Descriptor(), typ.String(), 0) {
			if !set[f] {
				t.Errorf("fixed sample of %s leaves %s unset", typ, f)
			}
		}
	}
}

// registeredTypes returns the registry's types in ascending order, so test
// output and golden files are stable.
func registeredTypes() []Type {
	ts := make([]Type, 0, len(registry))
	for t := range registry {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return ts
}

// sampleCommand is the fixed command for t with fixed metadata.
func sampleCommand(tb testing.TB, t Type) Command {
	tb.Helper()
	mk, ok := fixedSamples[t]
	if !ok {
		tb.Fatalf("no fixed sample for registered type %s; add one to fixedSamples", t)
	}
	c := MustNew(mk())
	c.RequestID = "req-" + t.String()
	c.ProposedAtUnixMs = 1700000000000
	c.LeaderTerm = 7
	return c
}

// diffCommands describes the first difference between two command lists, or
// returns "" when they are equal (bodies compared with proto.Equal).
func diffCommands(got, want []Command) string {
	if len(got) != len(want) {
		return fmt.Sprintf("got %d commands, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		switch {
		case g.Type != w.Type:
			return fmt.Sprintf("command %d: type %s, want %s", i, g.Type, w.Type)
		case g.Version != w.Version:
			return fmt.Sprintf("command %d: version %d, want %d", i, g.Version, w.Version)
		case g.RequestID != w.RequestID:
			return fmt.Sprintf("command %d: request ID %q, want %q", i, g.RequestID, w.RequestID)
		case g.ProposedAtUnixMs != w.ProposedAtUnixMs:
			return fmt.Sprintf("command %d: proposed at %d, want %d", i, g.ProposedAtUnixMs, w.ProposedAtUnixMs)
		case g.LeaderTerm != w.LeaderTerm:
			return fmt.Sprintf("command %d: leader term %d, want %d", i, g.LeaderTerm, w.LeaderTerm)
		case g.CallerNode != w.CallerNode:
			return fmt.Sprintf("command %d: caller node %d, want %d", i, g.CallerNode, w.CallerNode)
		case (g.Body == nil) != (w.Body == nil):
			return fmt.Sprintf("command %d: body %v, want %v", i, g.Body, w.Body)
		case g.Body != nil && !proto.Equal(g.Body, w.Body):
			return fmt.Sprintf("command %d: body %v, want %v", i, g.Body, w.Body)
		}
	}
	return ""
}

// genBody fills a fresh body of type t with random field values, driven by
// the message descriptor so a newly registered type is covered with no test
// changes.
func genBody(t *rapid.T, typ Type) proto.Message {
	m := registry[typ].newBody()
	genMessage(t, m.ProtoReflect(), typ.String(), 0)
	return m
}

func genMessage(t *rapid.T, m protoreflect.Message, path string, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		name := path + "." + string(fd.Name())
		if !rapid.Bool().Draw(t, name+"?") {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			n := rapid.IntRange(0, 3).Draw(t, name+".len")
			for j := 0; j < n; j++ {
				l.Append(genValue(t, fd, l.NewElement, name, depth))
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			n := rapid.IntRange(0, 3).Draw(t, name+".len")
			for j := 0; j < n; j++ {
				k := genValue(t, fd.MapKey(), nil, name+".key", depth).MapKey()
				mp.Set(k, genValue(t, fd.MapValue(), mp.NewValue, name+".value", depth))
			}
		default:
			m.Set(fd, genValue(t, fd, func() protoreflect.Value { return m.NewField(fd) }, name, depth))
		}
	}
}

func genValue(t *rapid.T, fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, name string, depth int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(rapid.Bool().Draw(t, name))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(rapid.Int32().Draw(t, name))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(rapid.Int64().Draw(t, name))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(rapid.Uint32().Draw(t, name))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(rapid.Uint64().Draw(t, name))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(rapid.Int32().Draw(t, name)))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(rapid.Float64().Draw(t, name))
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(rapid.StringN(0, -1, 80).Draw(t, name))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes(rapid.SliceOfN(rapid.Byte(), 0, 32).Draw(t, name))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		v := vals.Get(rapid.IntRange(0, vals.Len()-1).Draw(t, name))
		return protoreflect.ValueOfEnum(v.Number())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		v := newMsg()
		if depth < 3 {
			genMessage(t, v.Message(), name, depth+1)
		}
		return v
	}
	t.Fatalf("genValue: field %s has unsupported kind %v; teach the generator about it", fd.FullName(), fd.Kind())
	return protoreflect.Value{}
}

func genCommand(t *rapid.T, label string) Command {
	typ := rapid.SampledFrom(registeredTypes()).Draw(t, label+".type")
	c := MustNew(genBody(t, typ))
	c.RequestID = rapid.StringN(0, -1, vocab.MaxRequestIDBytes).Draw(t, label+".requestID")
	c.ProposedAtUnixMs = rapid.Int64().Draw(t, label+".at")
	c.LeaderTerm = rapid.Uint64().Draw(t, label+".term")
	c.CallerNode = rapid.Uint64().Draw(t, label+".caller")
	return c
}

func TestRegistryHasSamples(t *testing.T) {
	for _, typ := range registeredTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			c := sampleCommand(t, typ)
			if got, ok := TypeOf(c.Body); !ok || got != typ {
				t.Fatalf("TypeOf(sample) = %s, %v; want %s, true", got, ok, typ)
			}
			if c.Version != registry[typ].version || c.Version == 0 {
				t.Fatalf("New stamped version %d, want the registry's %d (and > 0)", c.Version, registry[typ].version)
			}
			if err := Validate(c); err != nil {
				t.Fatalf("fixed sample must be valid: %v", err)
			}
		})
	}
	for typ := range fixedSamples {
		if _, ok := registry[typ]; !ok {
			t.Errorf("fixedSamples has %s, which is not registered", typ)
		}
	}
}

func TestNewRejectsUnregisteredBody(t *testing.T) {
	_, err := New(&logpb.Member{Id: "x"}, "")
	if !errors.Is(err, ErrUnknownType) {
		t.Fatalf("New(Member) error = %v, want ErrUnknownType", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("MustNew(Member) did not panic")
		}
	}()
	MustNew(&logpb.Member{Id: "x"})
}

func TestTypeString(t *testing.T) {
	tests := []struct {
		typ  Type
		want string
	}{
		{TypeLeaderEstablished, "LeaderEstablished"},
		{TypeReserveIDs, "ReserveIDs"},
		{TypeInitStreaming, "InitStreaming"},
		{TypeUpdateReplicateConfiguration, "UpdateReplicateConfiguration"},
		{0x0101, "InitStreaming"},
		{0x010C, "UpdateReplicateConfiguration"},
		{TypeResetReplicateRole, "ResetReplicateRole"},
		{0x010D, "ResetReplicateRole"},
		{0x01FF, "Type(0x01ff)"},
		{TypeCreateBroadcast, "CreateBroadcast"},
		{0x0205, "PruneBroadcastTombstones"},
		{0x0206, "Type(0x0206)"},
		{0x0777, "Type(0x0777)"},
		{Ignorable | 0x0001, "Type(0x8001)"},
	}
	for _, tt := range tests {
		if got := tt.typ.String(); got != tt.want {
			t.Errorf("Type(%#x).String() = %q, want %q", uint32(tt.typ), got, tt.want)
		}
	}
	if TypeUpsertMember.IsIgnorable() || !(Ignorable | 0x0777).IsIgnorable() {
		t.Error("IsIgnorable does not follow the 0x8000 bit")
	}
}

// TestRoundTripEveryType encodes each registered type's fixed sample, alone
// and batched with all others, and decodes it back.
func TestRoundTripEveryType(t *testing.T) {
	var all []Command
	for _, typ := range registeredTypes() {
		c := sampleCommand(t, typ)
		all = append(all, c)
		t.Run(typ.String(), func(t *testing.T) {
			data, err := EncodeEntry([]Command{c})
			if err != nil {
				t.Fatalf("EncodeEntry: %v", err)
			}
			got, err := DecodeEntry(data)
			if err != nil {
				t.Fatalf("DecodeEntry: %v", err)
			}
			if d := diffCommands(got, []Command{c}); d != "" {
				t.Fatal(d)
			}
			// Encoding is deterministic: the same command gives the same bytes.
			again, err := EncodeEntry(got)
			if err != nil || !bytes.Equal(again, data) {
				t.Fatalf("re-encoding differs (err %v):\n got %x\nwant %x", err, again, data)
			}
		})
	}
	data, err := EncodeEntry(all)
	if err != nil {
		t.Fatalf("EncodeEntry(all): %v", err)
	}
	got, err := DecodeEntry(data)
	if err != nil {
		t.Fatalf("DecodeEntry(all): %v", err)
	}
	if d := diffCommands(got, all); d != "" {
		t.Fatalf("batch of every type: %s", d)
	}
}

// TestRoundTripRandom: any batch of registered commands with random field
// values and metadata decodes to what was encoded.
func TestRoundTripRandom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "n")
		cmds := make([]Command, n)
		for i := range cmds {
			cmds[i] = genCommand(t, fmt.Sprintf("cmd%d", i))
		}
		data, err := EncodeEntry(cmds)
		if err != nil {
			t.Fatalf("EncodeEntry: %v", err)
		}
		got, err := DecodeEntry(data)
		if err != nil {
			t.Fatalf("DecodeEntry: %v", err)
		}
		if d := diffCommands(got, cmds); d != "" {
			t.Fatal(d)
		}
	})
}

func TestEncodeEntryLimits(t *testing.T) {
	small := MustNew(&logpb.ReserveIDs{Count: 1})
	withID := func(id string) Command { c := small; c.RequestID = id; return c }
	repeat := func(c Command, n int) []Command {
		out := make([]Command, n)
		for i := range out {
			out[i] = c
		}
		return out
	}
	// A body of exactly MaxCommandBytes: UpsertMember{Member{Id: s}} has
	// two tags and two length prefixes around s.
	bodyOfSize := func(size int) Command {
		for n := size - 16; n <= size; n++ {
			b := &logpb.UpsertMember{Member: &logpb.Member{Id: strings.Repeat("m", n)}}
			if proto.Size(b) == size {
				return MustNew(b)
			}
		}
		t.Fatalf("cannot build a body of exactly %d bytes", size)
		return Command{}
	}
	tests := []struct {
		name    string
		cmds    []Command
		wantErr error
	}{
		{"no commands", nil, ErrTooLarge},
		{"empty slice", []Command{}, ErrTooLarge},
		{"one command", []Command{small}, nil},
		{"max commands", repeat(small, MaxCommandsPerEntry), nil},
		{"too many commands", repeat(small, MaxCommandsPerEntry+1), ErrTooLarge},
		{"request ID at limit", []Command{withID(strings.Repeat("r", vocab.MaxRequestIDBytes))}, nil},
		{"request ID over limit", []Command{withID(strings.Repeat("r", vocab.MaxRequestIDBytes+1))}, ErrInvalid},
		{"request ID over limit in second command", []Command{small, withID(strings.Repeat("r", vocab.MaxRequestIDBytes+1))}, ErrInvalid},
		{"body at limit", []Command{bodyOfSize(MaxCommandBytes)}, nil},
		{"body over limit", []Command{bodyOfSize(MaxCommandBytes + 1)}, ErrTooLarge},
		{"entry over limit", repeat(bodyOfSize(MaxCommandBytes), MaxEntryBytes/MaxCommandBytes+1), ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := EncodeEntry(tt.cmds)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("EncodeEntry: unexpected error %v", err)
				}
				if len(data) > MaxEntryBytes {
					t.Fatalf("encoded entry is %d bytes, over MaxEntryBytes", len(data))
				}
				got, err := DecodeEntry(data)
				if err != nil {
					t.Fatalf("an entry EncodeEntry accepts must decode: %v", err)
				}
				if d := diffCommands(got, tt.cmds); d != "" {
					t.Fatal(d)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("EncodeEntry error = %v, want %v", err, tt.wantErr)
			}
			if data != nil {
				t.Fatalf("EncodeEntry returned %d bytes with an error", len(data))
			}
		})
	}
}

// rawEnvelope appends one Envelope, field by field, so tests can write
// entries EncodeEntry would refuse to produce.
func rawEnvelope(typ, version uint32, requestID string, body []byte) []byte {
	var env []byte
	env = protowire.AppendTag(env, 1, protowire.VarintType)
	env = protowire.AppendVarint(env, uint64(typ))
	env = protowire.AppendTag(env, 2, protowire.VarintType)
	env = protowire.AppendVarint(env, uint64(version))
	if requestID != "" {
		env = protowire.AppendTag(env, 3, protowire.BytesType)
		env = protowire.AppendString(env, requestID)
	}
	env = protowire.AppendTag(env, 4, protowire.VarintType)
	env = protowire.AppendVarint(env, 1700000000000)
	env = protowire.AppendTag(env, 5, protowire.VarintType)
	env = protowire.AppendVarint(env, 3)
	if body != nil {
		env = protowire.AppendTag(env, 6, protowire.BytesType)
		env = protowire.AppendBytes(env, body)
	}
	var entry []byte
	entry = protowire.AppendTag(entry, 1, protowire.BytesType)
	return protowire.AppendBytes(entry, env)
}

func rawEntry(envs ...[]byte) []byte { return bytes.Join(envs, nil) }

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeEntryErrors(t *testing.T) {
	reserve := mustMarshal(t, &logpb.ReserveIDs{Count: 5})
	good := rawEnvelope(uint32(TypeReserveIDs), 1, "ok", reserve)
	tests := []struct {
		name    string
		data    []byte
		wantErr error
		errText string // optional substring of the error
	}{
		{"garbage bytes", []byte{0xff, 0xff, 0xff, 0xff}, ErrMalformed, ""},
		{"truncated entry", good[:len(good)-2], ErrMalformed, ""},
		{"empty entry", nil, ErrMalformed, "0 commands"},
		{"too many commands", rawEntry(bytes.Repeat(good, MaxCommandsPerEntry+1)), ErrMalformed, "513 commands"},
		{"entry over MaxEntryBytes", make([]byte, MaxEntryBytes+1), ErrTooLarge, ""},
		{"request ID over limit", rawEnvelope(uint32(TypeReserveIDs), 1, strings.Repeat("r", vocab.MaxRequestIDBytes+1), reserve), ErrMalformed, "request_id"},
		{"request ID not UTF-8", rawEnvelope(uint32(TypeReserveIDs), 1, "\xff\xfe", reserve), ErrMalformed, ""},
		{"body over MaxCommandBytes", rawEnvelope(uint32(TypeReserveIDs), 1, "", make([]byte, MaxCommandBytes+1)), ErrTooLarge, ""},
		{"unknown type", rawEnvelope(0x0777, 1, "", reserve), ErrUnknownType, "0x0777"},
		{"unknown type in second command", rawEntry(good, rawEnvelope(0x0777, 1, "", nil)), ErrUnknownType, "command 1"},
		{"version 0", rawEnvelope(uint32(TypeReserveIDs), 0, "", reserve), ErrMalformed, "version 0"},
		{"newer version", rawEnvelope(uint32(TypeReserveIDs), 2, "", reserve), ErrNewerVersion, "version 2"},
		{"garbage body", rawEnvelope(uint32(TypeReserveIDs), 1, "", []byte{0x08}), ErrMalformed, "body"},
		{"body not UTF-8 in string field", rawEnvelope(uint32(TypeRemoveMember), 1, "", []byte{0x0a, 0x02, 0xff, 0xfe}), ErrMalformed, "body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmds, err := DecodeEntry(tt.data)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("DecodeEntry error = %v, want %v", err, tt.wantErr)
			}
			if tt.errText != "" && !strings.Contains(err.Error(), tt.errText) {
				t.Fatalf("DecodeEntry error %q does not mention %q", err, tt.errText)
			}
			if cmds != nil {
				t.Fatalf("DecodeEntry returned %d commands with an error", len(cmds))
			}
		})
	}
}

// withTestType registers an extra type for the duration of a test. No
// released type is ignorable yet, so this is the only way to exercise the
// "known, ignorable, but newer" path.
func withTestType(t *testing.T, typ Type, version uint32) {
	t.Helper()
	if _, exists := registry[typ]; exists {
		t.Fatalf("type %s is already registered", typ)
	}
	registry[typ] = spec{name: "TestIgnorable", version: version, newBody: func() proto.Message { return &logpb.ReserveIDs{} }}
	t.Cleanup(func() { delete(registry, typ) })
}

func TestDecodeEntrySkippable(t *testing.T) {
	const testType = Ignorable | 0x0042
	withTestType(t, testType, 1)
	reserve := mustMarshal(t, &logpb.ReserveIDs{Count: 5})
	tests := []struct {
		name     string
		data     []byte
		wantBody proto.Message // nil: the command is skipped (nil Body)
		wantVer  uint32
	}{
		{"unknown ignorable type", rawEnvelope(uint32(Ignorable|0x0777), 3, "skip-me", []byte("anything")), nil, 3},
		{"unknown ignorable type, version 0", rawEnvelope(uint32(Ignorable|0x0777), 0, "skip-me", nil), nil, 0},
		{"unknown ignorable type, garbage body", rawEnvelope(uint32(Ignorable|0x0777), 1, "skip-me", []byte{0xff, 0xff}), nil, 1},
		{"known ignorable type, current version", rawEnvelope(uint32(testType), 1, "skip-me", reserve), &logpb.ReserveIDs{Count: 5}, 1},
		{"known ignorable type, newer version", rawEnvelope(uint32(testType), 2, "skip-me", reserve), nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmds, err := DecodeEntry(tt.data)
			if err != nil {
				t.Fatalf("DecodeEntry: %v", err)
			}
			if len(cmds) != 1 {
				t.Fatalf("got %d commands, want 1", len(cmds))
			}
			c := cmds[0]
			if c.RequestID != "skip-me" || c.Version != tt.wantVer || c.LeaderTerm != 3 || c.ProposedAtUnixMs != 1700000000000 {
				t.Fatalf("metadata not preserved: %+v", c)
			}
			if tt.wantBody == nil {
				if c.Body != nil {
					t.Fatalf("Body = %v, want nil (skipped)", c.Body)
				}
				return
			}
			if c.Body == nil || !proto.Equal(c.Body, tt.wantBody) {
				t.Fatalf("Body = %v, want %v", c.Body, tt.wantBody)
			}
		})
	}
	// A known non-ignorable type at a newer version is still fatal next to a
	// skippable one.
	_, err := DecodeEntry(rawEntry(
		rawEnvelope(uint32(testType), 2, "", reserve),
		rawEnvelope(uint32(TypeReserveIDs), 2, "", reserve)))
	if !errors.Is(err, ErrNewerVersion) {
		t.Fatalf("mixed entry error = %v, want ErrNewerVersion", err)
	}
}

// TestSkippedCommandReencodes: a skipped command (nil Body) can be carried
// through EncodeEntry and decodes to a skipped command again.
func TestSkippedCommandReencodes(t *testing.T) {
	skipped := Command{Type: Ignorable | 0x0777, Version: 9, RequestID: "x", LeaderTerm: math.MaxUint64}
	data, err := EncodeEntry([]Command{skipped})
	if err != nil {
		t.Fatalf("EncodeEntry: %v", err)
	}
	got, err := DecodeEntry(data)
	if err != nil {
		t.Fatalf("DecodeEntry: %v", err)
	}
	if d := diffCommands(got, []Command{skipped}); d != "" {
		t.Fatal(d)
	}
}
