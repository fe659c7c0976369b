package commands

import (
	"testing"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Every registered command type has a growth class, and the table names no
// type the registry does not know: a new command must be classified for
// the memory guard (docs/operations.md#memory-guard) before it builds.
func TestGrowthTableClassifiesEveryCommand(t *testing.T) {
	for typ, s := range registry {
		g, ok := growthTable[typ]
		if !ok {
			t.Errorf("%s has no growth class in growthTable (commands/growth.go)", s.name)
			continue
		}
		if g != keeps && g != grows && g != growsByBody {
			t.Errorf("%s has an unknown growth class %d", s.name, g)
		}
	}
	for typ := range growthTable {
		if _, ok := registry[typ]; !ok {
			t.Errorf("growthTable classifies %s, which the registry does not know", typ)
		}
	}
}

func TestGrows(t *testing.T) {
	body := func(mt string) *logpb.CreateBroadcast { return &logpb.CreateBroadcast{MessageType: mt} }
	cases := []struct {
		name string
		c    Command
		want bool
	}{
		{"new collection", Command{Type: TypeAllocVirtualChannels, Body: &logpb.AllocVirtualChannels{}}, true},
		{"new segment", Command{Type: TypeCreateSegment, Body: &logpb.CreateSegment{}}, true},
		{"import segment", Command{Type: TypeCreateImportSegment, Body: &logpb.CreateImportSegment{}}, true},
		{"create collection broadcast", Command{Type: TypeCreateBroadcast, Body: body(vocab.MsgCreateCollection)}, true},
		{"opaque broadcast", Command{Type: TypeCreateBroadcast, Body: body("CreatePartition")}, true},
		{"drop collection broadcast", Command{Type: TypeCreateBroadcast, Body: body(vocab.MsgDropCollection)}, false},
		{"drop partition broadcast", Command{Type: TypeCreateBroadcast, Body: body("DropPartition")}, false},
		{"flush all broadcast", Command{Type: TypeCreateBroadcast, Body: body(vocab.MsgFlushAll)}, false},
		{"replicate config broadcast", Command{Type: TypeCreateBroadcast, Body: body(vocab.MsgAlterReplicateConfig)}, false},
		{"token", Command{Type: TypeCreateToken, Body: &logpb.CreateToken{Token: &logpb.TokenRecord{}}}, true},
		{"bootstrap token", Command{Type: TypeCreateToken, Body: &logpb.CreateToken{Token: &logpb.TokenRecord{Bootstrap: true}}}, false},
		{"drop vchannels", Command{Type: TypeDropVirtualChannels, Body: &logpb.DropVirtualChannels{}}, false},
		{"binlogs", Command{Type: TypeSaveBinlogPaths, Body: &logpb.SaveBinlogPaths{}}, false},
		{"checkpoints", Command{Type: TypeUpdateChannelCheckpoints, Body: &logpb.UpdateChannelCheckpoints{}}, false},
		{"ack", Command{Type: TypeAckBroadcast, Body: &logpb.AckBroadcast{}}, false},
		{"leader established", Command{Type: TypeLeaderEstablished, Body: &logpb.LeaderEstablished{}}, false},
		{"unknown ignorable type", Command{Type: Ignorable | 0x7ff0}, true},
	}
	for _, tc := range cases {
		if got := Grows(tc.c); got != tc.want {
			t.Errorf("%s: Grows = %v, want %v", tc.name, got, tc.want)
		}
	}
}
