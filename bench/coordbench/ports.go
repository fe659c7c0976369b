package main

import (
	"fmt"
	"net"
	"time"
)

// launcherPorts lists every port a launched cluster binds (see
// cluster.LauncherConfig.BasePort): members' gRPC, raft and HTTP, the
// streaming nodes' and their metrics.
func launcherPorts(base, nodes, streamingNodes int) []int {
	var out []int
	for i := range nodes {
		out = append(out, base+i, base+100+i, base+1000+i)
	}
	for i := range streamingNodes {
		out = append(out, base+200+i, base+1200+i)
	}
	return out
}

// portsFree refuses to start when something already listens on one of the
// ports: the launcher's readiness probe would otherwise find that process
// (another cluster on this machine, e.g. a `coordd dev`) and the benchmark
// would measure, and write into, a cluster it did not start.
func portsFree(ports []int) error {
	for _, p := range ports {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", p), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return fmt.Errorf("port %d on 127.0.0.1 is in use: pick another -base-port / -etcd-port / -peer-port", p)
		}
	}
	return nil
}
