package fsm

import (
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// BenchmarkChannelCheckpointsApply is the cost of one
// UpdateChannelCheckpoints apply of 128 VChannels (Milvus's data nodes
// report in batches) against the Milvus-max channel table: 65,536
// VChannels over 256 PChannels, every one with a stored checkpoint.
func BenchmarkChannelCheckpointsApply(b *testing.B) {
	s := ownedShape(b, SyntheticShape{Segments: 10_000, VChannels: 65536, PChannels: 256})
	var names []string
	for it := s.ch.collections.Iterator(); !it.Done(); {
		_, c, _ := it.Next()
		names = append(names, c.Vchannels...)
	}
	base := ComposeTS(s.TSOLimitPhysicalMs() - 1)
	const batch = 128
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ts := base + uint64(i)
		us := make([]*logpb.ChannelCheckpointUpdate, batch)
		for k := range us {
			us[k] = &logpb.ChannelCheckpointUpdate{Vchannel: names[(i*batch+k*509)%len(names)], PchannelTerm: 2,
				Position: &logpb.WALPosition{Term: 2, Offset: uint64(i), Timestamp: ts}}
		}
		c := commands.MustNew(&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: us})
		next, res, err := s.ApplyCommands(s.AppliedIndex()+1, c)
		if err != nil || res[0].Rejection != nil {
			b.Fatalf("%v %v", err, res[0].GetRejection())
		}
		if got := res[0].GetCheckpoints().GetAccepted(); got != batch {
			b.Fatalf("accepted %d of %d: %v", got, batch, res[0].GetCheckpoints().GetRefused())
		}
		s = next
	}
}
