package main

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

func TestParseClients(t *testing.T) {
	got, err := parseClients("1, 16,64")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 16 || got[2] != 64 {
		t.Fatalf("parseClients = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "1,,2", "2000"} {
		if _, err := parseClients(bad); err == nil {
			t.Errorf("parseClients(%q) accepted", bad)
		}
	}
}

func TestNextPositionGrowsAndRunsAhead(t *testing.T) {
	prev := nextPosition()
	for range 10000 {
		p := nextPosition()
		if p <= prev {
			t.Fatalf("position %d after %d", p, prev)
		}
		prev = p
	}
	if now := uint64(time.Now().UnixMilli()) << 18; prev < now {
		t.Fatalf("position %d is behind the wall clock %d", prev, now)
	}
}

// Every VChannel belongs to exactly one client, whatever the client count.
func TestMinePartitionsTheVChannels(t *testing.T) {
	d := &dataSet{}
	for i := range dataVChannels {
		d.vchs = append(d.vchs, dataVch{segment: int64(i)})
	}
	for _, clients := range []int{1, 16, 64, 999} {
		seen := map[int64]int{}
		for c := range clients {
			for _, v := range d.mine(c, clients) {
				seen[v.segment]++
			}
		}
		if len(seen) != dataVChannels {
			t.Fatalf("%d clients cover %d of %d vchannels", clients, len(seen), dataVChannels)
		}
		for s, n := range seen {
			if n != 1 {
				t.Fatalf("%d clients: vchannel %d taken %d times", clients, s, n)
			}
		}
	}
}

func TestFsyncRateIsBounded(t *testing.T) {
	dir := t.TempDir()
	r, err := fsyncRate(dir, 20, 5*time.Second)
	if err != nil || r <= 0 {
		t.Fatalf("fsyncRate = %v, %v", r, err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the probe left %d files", len(left))
	}
	if _, err := fsyncRate("/nonexistent-dir", 1, time.Second); err == nil {
		t.Fatal("a missing directory was accepted")
	}
}

func TestRunCellCountsErrorsAndStopsAtMaxOps(t *testing.T) {
	calls := 0
	st := runCell(1, 5*time.Second, time.Second, 10, func(int) clientOp {
		return func(_ context.Context, i int) error {
			calls++
			if i%2 == 1 {
				return errors.New("odd")
			}
			return nil
		}
	}, nil)
	// warm-up pass and measured pass, 10 calls each
	if calls != 20 || st.Ops+st.Errors != 10 || st.Errors != 5 || st.FirstErr == nil {
		t.Fatalf("calls %d, stats %+v", calls, st)
	}
}

func TestPortsFreeRefusesATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := portsFree([]int{port}); err == nil {
		t.Fatal("a listening port was reported free")
	}
	l.Close()
	if err := portsFree([]int{port}); err != nil {
		t.Fatalf("a closed port: %v", err)
	}
	if got := launcherPorts(100, 1, 1); len(got) != 5 || got[0] != 100 || got[3] != 300 {
		t.Fatalf("launcherPorts = %v", got)
	}
}
