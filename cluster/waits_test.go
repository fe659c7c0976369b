package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/testutil"
)

// The bounds of the multi-process tests' waits for other processes. They
// are upper bounds on an idle machine, scaled by COORDD_TEST_MULTIPLIER
// (testutil.Timeout), never sleeps: a passing test waits only as long as
// the processes take. A process's start, TLS handshakes and elections
// share two cores with every other test package under `make test`, so the
// bounds are generous; a bound that is too short fails a correct cluster.
const (
	// readyWait: a member started (or restarted) answers /readyz.
	readyWait = 30 * time.Second
	// processWait: another process (a streaming node, a member) acts on
	// the cluster: registers, sees a token, reports its addresses.
	processWait = 30 * time.Second
	// pollProcess is how often a wait on another process asks again: each
	// ask is an RPC, which a loaded machine should not be flooded with.
	pollProcess = 50 * time.Millisecond
)

// waitReady fails t unless member i of l answers /readyz within the
// scaled readiness wait.
func waitReady(t *testing.T, ctx context.Context, l *cluster.Launcher, i int) {
	t.Helper()
	if err := l.WaitReady(ctx, i, testutil.Timeout(readyWait)); err != nil {
		t.Fatal(err)
	}
}
