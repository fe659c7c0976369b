package workload

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
)

// firstPChannels is the start of a workload that writes to streaming
// nodes: it fails unless the run has them, then waits until the cluster
// lists its PChannels (a linearizable read through member 0, tried again
// every 100 ms) and returns the first n names in name order (n <= 0: 3).
// Once ctx ends it returns what it has, possibly nothing.
func firstPChannels(ctx context.Context, env Env, workload string, n int) ([]string, error) {
	if env.WALDir == "" {
		return nil, fmt.Errorf("%s workload needs streaming nodes (env.WALDir)", workload)
	}
	if n <= 0 {
		n = 3
	}
	admin, err := client.New(ctx, env.ClientConfig(RoleRead, env.Endpoints(0)))
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	var names []string
	for ctx.Err() == nil {
		lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := admin.ListPChannels(lctx, coordpb.ReadConsistency_LINEARIZABLE)
		cancel()
		if err == nil && len(resp.Pchannels) > 0 {
			for _, p := range resp.Pchannels {
				names = append(names, p.Name)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	sort.Strings(names)
	if len(names) > n {
		names = names[:n]
	}
	return names, nil
}
