package nemesis

import (
	"context"
	"time"
)

// fault is one kind of fault: it injects itself, holds for hold, heals, and
// fills in the window's targets and details (resetting w.Start to the
// moment the fault took effect). An error means the fault could not be
// injected or healed as planned; it is recorded in the window.
type fault interface {
	run(ctx context.Context, n *Nemesis, s Step, hold time.Duration, w *Window) error
}

// faults maps every kind to its implementation.
var faults = map[Kind]fault{
	IsolateLeader: isolateLeader{},
	SplitMajority: splitMajority{},
	OneWay:        oneWay{},
	Flapping:      flapping{},
	DelayLinks:    delayLinks{},
	ClientCut:     clientCut{},
	KillNode:      killNodes{},
	KillLeader:    killNodes{},
	PauseNode:     pauseNodes{},
	Transfer:      transfer{},
	RemoveAdd:     removeReadd{},
	RestartAll:    restartAll{},
	DiskLoss:      diskLoss{},
	StorageDamage: storageDamage{},
}
