package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/raftnode"
)

// TestStateBudgetGuard runs a member with a tiny state budget: tokens
// are created until the guard refuses the next one with *StateBudgetError
// naming the budget, the size and what frees it, and nothing of it is
// applied; a new collection is refused too. While over the budget, a drop
// and commands that keep data safe still commit; every token and
// collection acknowledged before is still there; once revocations bring
// the state under the budget, growth commits again. The guard's clock
// never moves, so the bytes per record are the ones measured after the
// set-up and the estimate follows the record count alone
// (docs/operations.md#memory-guard).
func TestStateBudgetGuard(t *testing.T) {
	const budget = 6 << 10
	epoch := time.Unix(1_700_000_000, 0)
	c := newCluster(t, 1, withConfig(func(_ int, cfg *raftnode.Config) {
		cfg.StateBudget = budget
		cfg.StateMeasureInterval = time.Hour
		cfg.StateClock = func() time.Time { return epoch }
	}))
	n := c.node(c.waitLeader())
	mustPropose(t, n, &logpb.InitStreaming{ClusterId: "guard", Pchannels: []string{"dml_0", "dml_1"}}, "")
	for id := int64(1); id <= 3; id++ {
		mustPropose(t, n, &logpb.AllocVirtualChannels{CollectionId: id, Count: 2}, "")
	}

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	tokenID := func(i int) string { return fmt.Sprintf("%016x", i) }
	create := func(i int) error {
		res, err := propose(ctx, n, &logpb.CreateToken{Token: &logpb.TokenRecord{Id: tokenID(i), Name: fmt.Sprintf("t%d", i),
			Role: logpb.TokenRole_TOKEN_ROLE_READ, SecretSha256: make([]byte, 32)}}, "")
		if err == nil && res.Rejection != nil {
			t.Fatalf("token %d rejected by Apply: %v", i, res.Rejection)
		}
		return err
	}
	for i := 1; i <= 5; i++ {
		if err := create(i); err != nil {
			t.Fatal(err)
		}
	}
	n.MeasureState()

	var refused error
	next := 6
	for ; next <= 1000; next++ {
		if refused = create(next); refused != nil {
			break
		}
	}
	acked := next - 1
	var be *raftnode.StateBudgetError
	if !errors.As(refused, &be) || !errors.Is(refused, raftnode.ErrStateBudget) {
		t.Fatalf("after %d tokens: %v, want a *StateBudgetError", acked, refused)
	}
	if acked < 20 {
		t.Fatalf("only %d tokens fit in %d bytes: the guard refuses too early", acked, budget)
	}
	if be.Budget != budget || be.Bytes < budget || be.Type.String() != "CreateToken" {
		t.Fatalf("refusal %+v, want budget %d, size at or over it, type CreateToken", be, budget)
	}
	for _, want := range []string{"budget of 6.0 KiB", "nothing was done", "drop collections", "revoke unused tokens", "--state-budget"} {
		if !strings.Contains(refused.Error(), want) {
			t.Errorf("refusal %q does not say %q", refused, want)
		}
	}
	// Refused means never proposed: nothing was applied.
	applied := linearizableRead(t, n).AppliedIndex()
	if _, err := propose(ctx, n, &logpb.AllocVirtualChannels{CollectionId: 99, Count: 2}, ""); !errors.Is(err, raftnode.ErrStateBudget) {
		t.Fatalf("a new collection over the budget: %v, want ErrStateBudget", err)
	}
	st := linearizableRead(t, n)
	if st.AppliedIndex() != applied {
		t.Fatalf("applied index moved from %d to %d across refusals", applied, st.AppliedIndex())
	}
	if _, ok := st.Collection(99); ok {
		t.Fatal("refused collection 99 exists")
	}
	if _, ok := st.Token(tokenID(next)); ok {
		t.Fatalf("refused token %d exists", next)
	}

	// Over the budget, what frees or protects data commits.
	if size := n.StateSize(); size.Bytes < budget || size.Refused != 2 {
		t.Fatalf("size %+v: want at or over %d with 2 refusals", size, budget)
	}
	mustPropose(t, n, &logpb.ReserveIDs{Count: 10}, "")
	mustPropose(t, n, &logpb.DropVirtualChannels{CollectionId: 1}, "")

	// Nothing acknowledged is lost.
	st = linearizableRead(t, n)
	if _, ok := st.Collection(1); ok {
		t.Fatal("dropped collection 1 still exists")
	}
	for id := int64(2); id <= 3; id++ {
		if col, ok := st.Collection(id); !ok || len(col.GetVchannels()) != 2 {
			t.Fatalf("acknowledged collection %d: %v, %v", id, col, ok)
		}
	}
	for i := 1; i <= acked; i++ {
		if _, ok := st.Token(tokenID(i)); !ok {
			t.Fatalf("acknowledged token %d is missing", i)
		}
	}

	// Revocations bring the state under the budget (with room for the
	// two records added next); growth resumes.
	revoked := 0
	for n.StateSize().Bytes >= budget-512 {
		revoked++
		if revoked > acked {
			t.Fatalf("revoking every token left the state at %+v", n.StateSize())
		}
		mustPropose(t, n, &logpb.RevokeToken{Id: tokenID(revoked)}, "")
	}
	if err := create(next); err != nil {
		t.Fatalf("new token after revocations brought the state to %+v: %v", n.StateSize(), err)
	}
	mustPropose(t, n, &logpb.AllocVirtualChannels{CollectionId: 99, Count: 2}, "")
	st = linearizableRead(t, n)
	if _, ok := st.Token(tokenID(next)); !ok {
		t.Fatalf("token %d committed but missing", next)
	}
	t.Logf("%d tokens fit, %d revoked to get under %d bytes", acked, revoked, budget)
}

// TestStateBudgetOff: a zero budget never refuses.
func TestStateBudgetOff(t *testing.T) {
	c := newCluster(t, 1)
	n := c.node(c.waitLeader())
	mustPropose(t, n, &logpb.InitStreaming{ClusterId: "off", Pchannels: []string{"dml_0", "dml_1"}}, "")
	for id := int64(1); id <= 50; id++ {
		mustPropose(t, n, &logpb.AllocVirtualChannels{CollectionId: id, Count: 2}, "")
	}
	if s := n.StateSize(); s.Budget != 0 || s.Refused != 0 || s.Bytes <= 0 {
		t.Fatalf("size %+v, want budget 0, no refusal, a positive size", s)
	}
}
