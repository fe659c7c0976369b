package raftnode

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// writeAllocatorFloors appends the restore's RaiseAllocatorFloors entry
// right after the restored snapshot (index c.Index+1, term c.Term) to the
// member's log store. The member commits it with its first entry as
// leader, before it reserves any ID or TSO window, so nothing the old
// cluster may have handed out after the backup is handed out again
// (docs/operations.md#backup-and-restore). Nothing is written without
// floors.
func writeAllocatorFloors(logs raft.LogStore, c RestoreConfig) error {
	if c.IDFloor == 0 && c.TSOFloorMs == 0 {
		return nil
	}
	cmd, err := commands.New(&logpb.RaiseAllocatorFloors{NextId: c.IDFloor, TsoLimitPhysicalMs: c.TSOFloorMs}, "")
	if err != nil {
		return fmt.Errorf("allocator floors: %w", err)
	}
	cmd.ProposedAtUnixMs = c.NowMs
	data, err := commands.EncodeEntry([]commands.Command{cmd.DecidedIn(c.Term)})
	if err != nil {
		return fmt.Errorf("encode the allocator floors: %w", err)
	}
	if err := logs.StoreLog(&raft.Log{Index: c.Index + 1, Term: c.Term, Type: raft.LogCommand, Data: data}); err != nil {
		return fmt.Errorf("write the allocator floors entry: %w", err)
	}
	return nil
}
