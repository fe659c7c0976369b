package statuspage

import (
	"fmt"

	"github.com/coordd/coordd/vocab"
)

// stateWarnPercent is the share of the memory guard's budget from which
// the verdict names the state's size: early enough to drop or raise the
// budget before new collections, segments, broadcasts and tokens are
// refused (docs/operations.md#memory-guard).
const stateWarnPercent = 90

// stateBudgetReason is the verdict's sentence for a state of bytes against
// budget: "" under stateWarnPercent or with the guard off.
func stateBudgetReason(bytes, budget int64) string {
	if budget <= 0 || bytes*100 < budget*stateWarnPercent {
		return ""
	}
	at := fmt.Sprintf("state at %s of budget %s (%d%%)", vocab.FormatBytes(bytes), vocab.FormatBytes(budget), bytes*100/budget)
	if bytes >= budget {
		return at + ": over the budget, the memory guard refuses new collections, segments, broadcasts and tokens until drops free state (drops, flushes, checkpoints and acks still work)"
	}
	return at + ": near the budget, past it the memory guard refuses new collections, segments, broadcasts and tokens"
}
