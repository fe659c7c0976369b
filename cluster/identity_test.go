package cluster_test

import (
	"strings"
	"testing"

	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/raftnode"
)

// TestDeriveClusterID: every founding member derives the same ID whatever
// order it lists them in; a founder with another incarnation (a wiped data
// dir) derives another ID.
func TestDeriveClusterID(t *testing.T) {
	a := cluster.DeriveClusterID(map[string]string{"n1": "i1", "n2": "i2", "n3": "i3"})
	b := cluster.DeriveClusterID(map[string]string{"n3": "i3", "n1": "i1", "n2": "i2"})
	if a != b || len(a) != 32 {
		t.Fatalf("IDs %q and %q: want equal 128-bit hex IDs", a, b)
	}
	if c := cluster.DeriveClusterID(map[string]string{"n1": "i1", "n2": "i2", "n3": "wiped"}); c == a {
		t.Fatal("a new incarnation derived the same cluster ID")
	}
	if c := cluster.DeriveClusterID(map[string]string{"n1": "i1", "n2": "i2=n3", "n3": ""}); c == a {
		t.Fatal("shifting text between members derived the same cluster ID")
	}
}

// TestPeersAndJoinTogetherAreRefused: bootstrap and join are exclusive.
func TestPeersAndJoinTogetherAreRefused(t *testing.T) {
	err := cluster.CheckOptions(cluster.Options{
		Self:  raftnode.Self{ID: "n1", RaftAddr: "127.0.0.1:7101"},
		Peers: []raftnode.Peer{{ID: "n1", RaftAddr: "127.0.0.1:7101"}},
		Join:  "127.0.0.1:7002",
	})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("CheckOptions: %v, want a refusal of --peers with --join", err)
	}
}
