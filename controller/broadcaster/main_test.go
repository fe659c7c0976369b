package broadcaster

import (
	"context"
	"testing"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// broadcast is the tests' Check then Broadcast (a request Check refuses
// is the call's error, as on the API).
func broadcast(m *Manager, ctx context.Context, req Request) (Result, error) {
	c, err := Check(req)
	if err != nil {
		return Result{}, err
	}
	return m.Broadcast(ctx, c)
}

// ack is the tests' Manager.Ack of a log ack, built as NewAck builds it.
func ack(m *Manager, ctx context.Context, a *logpb.AckBroadcast) error {
	c, err := commands.New(a, "")
	if err != nil {
		return err
	}
	return m.Ack(ctx, Ack{cmd: c, id: a.BroadcastId})
}
