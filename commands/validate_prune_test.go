package commands

import (
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// A PruneDroppedVChannels decision names its term, keeps a retention of at
// least a second and forgets at most MaxVChannelsPerPrune.
func TestValidatePruneDroppedVChannels(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.PruneDroppedVChannels{RetentionMs: 10_800_000, MaxCount: 4096, DecisionTerm: 7}, ""},
		{"shortest retention", &logpb.PruneDroppedVChannels{RetentionMs: 1000, MaxCount: 1, DecisionTerm: 1}, ""},
		{"no decision term", &logpb.PruneDroppedVChannels{RetentionMs: 1000, MaxCount: 1}, "PruneDroppedVChannels needs its decision term"},
		{"retention under a second", &logpb.PruneDroppedVChannels{RetentionMs: 999, MaxCount: 1, DecisionTerm: 1}, "retention must be at least 1000 ms, got 999"},
		{"negative retention", &logpb.PruneDroppedVChannels{RetentionMs: -1, MaxCount: 1, DecisionTerm: 1}, "got -1"},
		{"max count 0", &logpb.PruneDroppedVChannels{RetentionMs: 1000, DecisionTerm: 1}, "max count must be in 1..4096, got 0"},
		{"max count over the bound", &logpb.PruneDroppedVChannels{RetentionMs: 1000, MaxCount: MaxVChannelsPerPrune + 1, DecisionTerm: 1}, "got 4097"},
	})
}
