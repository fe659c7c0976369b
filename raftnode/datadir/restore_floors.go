package datadir

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// Bounds on a restore's allocator floors. A floor above them leaves the
// restored cluster unable to allocate: IDs are int64 where they become
// segment, collection and broadcast IDs (the FSM refuses to create a
// segment at 2^63), and a timestamp's physical part has 46 bits (the TSO
// refuses a window limit at 2^46 ms, in the year 4199). Each bound leaves
// room for a working cluster's whole life above it.
const (
	// MaxRestoreIDFloor is 2^62: 2^62 (about 4.6e18) IDs remain below 2^63.
	MaxRestoreIDFloor uint64 = 1 << 62
	// MaxRestoreTSOFloorMs leaves a year of milliseconds (and 2^18
	// timestamps in each) below the 46-bit physical limit.
	MaxRestoreTSOFloorMs int64 = 1<<46 - 366*24*60*60*1000
)

// CheckRestoreFloors refuses floors the restored cluster could not
// allocate from (0 means no floor).
func CheckRestoreFloors(idFloor uint64, tsoFloorMs int64) error {
	if idFloor > MaxRestoreIDFloor {
		return fmt.Errorf("ID floor %d leaves too few IDs below 2^63 (segment and other IDs are int64): at most %d (2^62)", idFloor, MaxRestoreIDFloor)
	}
	if tsoFloorMs < 0 || tsoFloorMs > MaxRestoreTSOFloorMs {
		return fmt.Errorf("timestamp floor %d ms leaves less than a year below the 46-bit physical limit (%d ms): at most %d",
			tsoFloorMs, int64(1)<<46, MaxRestoreTSOFloorMs)
	}
	return nil
}

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
