package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
)

// SetRaftDelay holds every raft RPC of kind member i receives for d (0
// releases them), through its /debug/raft-delay route: the member must run
// with --fault-injection (nemesis.FaultInjectionArgs).
func (c *Cluster) SetRaftDelay(ctx context.Context, i int, kind string, d time.Duration) error {
	body, err := json.Marshal(map[string]any{"kind": kind, "delay_ms": d.Milliseconds()})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.scheme+c.members[i].HTTPAddr+"/debug/raft-delay", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok := c.sec.Token(RoleAdmin); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok) // the route needs admin
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /debug/raft-delay on %s: %d %s", c.members[i].ID, resp.StatusCode, bytes.TrimSpace(b))
	}
	return nil
}

// ReplaySnapshot makes member i deliver the last InstallSnapshot it
// received to itself again (POST /debug/replay-snapshot, --fault-injection).
func (c *Cluster) ReplaySnapshot(ctx context.Context, i int) (nemesis.Replay, error) {
	var out nemesis.Replay
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.scheme+c.members[i].HTTPAddr+"/debug/replay-snapshot", nil)
	if err != nil {
		return out, err
	}
	if tok := c.sec.Token(RoleAdmin); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusPreconditionFailed:
		return out, nemesis.ErrNoSnapshotYet
	case resp.StatusCode != http.StatusOK:
		return out, fmt.Errorf("POST /debug/replay-snapshot on %s: %d %s", c.members[i].ID, resp.StatusCode, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fmt.Errorf("POST /debug/replay-snapshot on %s: %w", c.members[i].ID, err)
	}
	return out, nil
}
