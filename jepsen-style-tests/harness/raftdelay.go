package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// SetRaftDelay holds every raft RPC of kind member i receives for d (0
// releases them), through its /debug/raft-delay route: the member must run
// with --fault-injection (nemesis.FaultInjectionArgs).
func (c *Cluster) SetRaftDelay(ctx context.Context, i int, kind string, d time.Duration) error {
	body, err := json.Marshal(map[string]any{"kind": kind, "delay_ms": d.Milliseconds()})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+c.members[i].HTTPAddr+"/debug/raft-delay", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
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
