package fsm

import (
	"fmt"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// ownedSynthetic is the Synthetic state of n segments with every PChannel
// owned by streaming node 1 at term 2, so saves and checkpoints from node 1
// pass the owner check.
func ownedSynthetic(tb testing.TB, n int) *State {
	tb.Helper()
	return ownedShape(tb, SyntheticShape{Segments: n})
}

// ownedShape is ownedSynthetic of any shape.
func ownedShape(tb testing.TB, shape SyntheticShape) *State {
	tb.Helper()
	s, err := Synthetic(shape)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range s.PChannels() {
		np := clonePChannel(p)
		np.State, np.NodeId, np.Term = logpb.PChannelState_PCHANNEL_ASSIGNED, 1, 2
		s.ch.pchannels = s.ch.pchannels.Set(p.Name, np)
	}
	return s
}

// checkpointEntries encodes count entries of perEntry UpdateChannelCheckpoints
// commands of perCommand checkpoints each, each checkpoint moving one
// VChannel forward (round robin over vchs, so every one is accepted).
func checkpointEntries(tb testing.TB, vchs []string, count, perEntry, perCommand int) [][]byte {
	tb.Helper()
	out := make([][]byte, count)
	k := 0
	for i := range out {
		cmds := make([]commands.Command, perEntry)
		for j := range cmds {
			b := &logpb.UpdateChannelCheckpoints{NodeId: 1}
			for range perCommand {
				v := vchs[k%len(vchs)]
				off := uint64(k/len(vchs) + 1)
				b.Checkpoints = append(b.Checkpoints, &logpb.ChannelCheckpointUpdate{Vchannel: v, PchannelTerm: 2,
					Position: &logpb.WALPosition{Term: 3, Offset: 1000000 + off, Timestamp: 449500000000000 + off}})
				k++
			}
			cmds[j] = commands.MustNew(b)
			cmds[j].LeaderTerm, cmds[j].ProposedAtUnixMs = 1, 1700000000000
		}
		data, err := commands.EncodeEntry(cmds)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = data
	}
	return out
}

// BenchmarkApply is the FSM's cost per committed entry for the commands
// the write path commits most: a small ID reservation, a member upsert, a
// channel checkpoint (alone, and 64 to an entry as the batcher packs them
// under load) against a 100k-segment state. Decoding the entry is
// included: a follower decodes every entry it applies. Run with -benchmem;
// B/op and allocs/op are per entry.
func BenchmarkApply(b *testing.B) {
	base := ownedSynthetic(b, 100_000)
	var vchs []string
	for _, c := range base.Collections() {
		vchs = append(vchs, c.Vchannels...)
	}
	one := func(body func(i int) commands.Command) func(b *testing.B) {
		return func(b *testing.B) {
			entries := make([][]byte, 4096)
			for i := range entries {
				c := body(i)
				c.LeaderTerm, c.ProposedAtUnixMs = 1, 1700000000000
				data, err := commands.EncodeEntry([]commands.Command{c})
				if err != nil {
					b.Fatal(err)
				}
				entries[i] = data
			}
			applyEntries(b, base, func(i int) []byte { return entries[i%len(entries)] })
		}
	}
	b.Run("ReserveIDs", one(func(int) commands.Command { return commands.MustNew(&logpb.ReserveIDs{Count: 1}) }))
	b.Run("UpsertMember", one(func(i int) commands.Command {
		return commands.MustNew(&logpb.UpsertMember{Member: &logpb.Member{Id: fmt.Sprintf("m%d", i%3), RaftAddr: "127.0.0.1:7000", GrpcAddr: "127.0.0.1:8000"}})
	}))
	// 64 checkpoints to an entry: as 64 callers' commands packed by the
	// batcher, and as one command holding all 64 (what coalescing the
	// callers' reports into one command would give).
	for _, tc := range []struct{ perEntry, perCommand int }{{1, 1}, {64, 1}, {1, 64}} {
		b.Run(fmt.Sprintf("UpdateChannelCheckpoints/commands=%d,checkpoints=%d", tc.perEntry, tc.perCommand), func(b *testing.B) {
			entries := checkpointEntries(b, vchs, max(1, b.N), tc.perEntry, tc.perCommand)
			applyEntries(b, base, func(i int) []byte { return entries[i] })
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tc.perEntry*tc.perCommand), "ns/checkpoint")
		})
	}
}

// applyEntries applies entry(i) at successive indexes, b.N times.
func applyEntries(b *testing.B, s *State, entry func(i int) []byte) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		next, res, err := s.Apply(s.AppliedIndex()+1, entry(i))
		if err != nil {
			b.Fatal(err)
		}
		if r := res[0]; r.Rejection != nil || (r.GetCheckpoints() != nil && len(r.GetCheckpoints().Refused) > 0) {
			b.Fatalf("entry %d: %v %v", i, r.Rejection, r.GetCheckpoints().GetRefused())
		}
		s = next
	}
}
