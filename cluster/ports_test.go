package cluster_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
)

// portBlockSpan is how far above its base a member block reaches: member i
// uses base+i, base+100+i, base+200+i, base+1000+i and base+1200+i
// (cluster.LauncherConfig.BasePort).
const portBlockSpan = 1200 + 3

// freeBasePort finds a base port whose gRPC, raft, streaming, HTTP and
// metrics blocks are free for nodes members.
//
// The search stays below the kernel's ephemeral range: a probe only says a
// port is free now, and a port inside that range can be handed to any
// process's outgoing connection or ":0" listener before coordd binds it
// (CI once saw "bind: address already in use" on 127.0.0.1:35000 that way).
// Ports below the range are only ever taken by an explicit bind.
func freeBasePort(t *testing.T, nodes int) int {
	t.Helper()
	lo, hi := basePortRange(t)
	span := (hi - lo) / 37 * 37
	if span <= 0 {
		t.Fatalf("no room for a port block in [%d, %d)", lo, hi)
	}
	start := lo + os.Getpid()%(span/37)*37
	for k := 0; k < span; k += 37 {
		base := lo + (start-lo+k)%span
		if blockFree(base, nodes) {
			return base
		}
	}
	t.Fatalf("no free port block on 127.0.0.1 in [%d, %d)", lo, hi)
	return 0
}

// basePortRange is [lo, hi) for a base port: from 20000 up to where the
// block would reach the ephemeral range's first port.
func basePortRange(t *testing.T) (lo, hi int) {
	t.Helper()
	ephemeralLow := 32768 // Linux's default when the file cannot be read
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var a, z int
		if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &a, &z); err == nil && a > 0 {
			ephemeralLow = a
		}
	}
	lo, hi = 20000, ephemeralLow-portBlockSpan
	if hi-lo < 37*8 {
		// A box whose ephemeral range starts low: fall back to the space
		// above it, where the race described above is possible.
		lo, hi = 61000, 65535-portBlockSpan
	}
	return lo, hi
}

func blockFree(base, nodes int) bool {
	for i := 0; i < nodes; i++ {
		for _, p := range []int{base + i, base + 100 + i, base + 200 + i, base + 1000 + i, base + 1200 + i} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				return false
			}
			l.Close()
		}
	}
	return true
}

// TestFreeBasePortStaysBelowTheEphemeralRange: every port of the block the
// multi-process tests use lies outside the range the kernel hands out on
// its own, so no unrelated connection can take one between probe and bind.
func TestFreeBasePortStaysBelowTheEphemeralRange(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		t.Skipf("no ephemeral range to check against: %v", err)
	}
	var ephLo, ephHi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &ephLo, &ephHi); err != nil {
		t.Fatalf("ip_local_port_range %q: %v", b, err)
	}
	base := freeBasePort(t, 3)
	top := base + portBlockSpan - 1
	if (base >= ephLo && base <= ephHi) || (top >= ephLo && top <= ephHi) || (base < ephLo && top > ephHi) {
		t.Fatalf("block [%d, %d] overlaps the ephemeral range [%d, %d]", base, top, ephLo, ephHi)
	}
}
