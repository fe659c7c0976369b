package raftnode

import (
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/coordd/coordd/raftnode/datadir"
)

// RecoverDataDir rewrites a stopped member's raft configuration to servers,
// for a cluster that lost its quorum for good (docs/operations.md#quorum-loss).
// It is raft.RecoverCluster: the state machine is rebuilt from the newest
// snapshot and every entry after it in the log (including entries that may
// never have committed: they become committed in the recovered cluster), a
// new snapshot with servers as its configuration is written, and the log is
// emptied. The member's term, vote and cluster ID are kept, so the other
// members that are still running and the survivor's own clients continue in
// the same cluster. servers must list this member as a voter.
func RecoverDataDir(dir string, servers []Server) error {
	ident, ok, err := datadir.ReadIdentity(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("data dir %s has no %s: it is not a coordd member's data dir", dir, datadir.IdentityFile)
	}
	if ident.ClusterID == "" {
		return fmt.Errorf("data dir %s never joined a cluster (%s has no cluster ID): there is nothing to recover", dir, datadir.IdentityFile)
	}
	var conf raft.Configuration
	self := false
	for _, s := range servers {
		sf := raft.Nonvoter
		if s.Voter {
			sf = raft.Voter
		}
		if s.ID == ident.MemberID && s.Voter {
			self = true
		}
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: sf, ID: raft.ServerID(s.ID), Address: raft.ServerAddress(s.RaftAddr)})
	}
	if !self {
		return fmt.Errorf("the new configuration does not list this data dir's member %s as a voter", ident.MemberID)
	}
	st, err := datadir.Open(datadir.Options{ID: ident.MemberID, Dir: dir})
	if err != nil {
		return err
	}
	defer st.Close()
	rc, err := Config{ID: ident.MemberID, DataDir: dir}.withDefaults().raftConfig(make(chan bool, 1))
	if err != nil {
		return err
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress(""))
	defer trans.Close()
	a := newFSMAdapter(rc.Logger)
	return datadir.Guard(dir, "recovering the cluster configuration", func() error {
		if err := raft.RecoverCluster(rc, a, st.Logs(), st.BoltStable(), st.Snapshots(), trans, conf); err != nil {
			return fmt.Errorf("recover cluster: %w", err)
		}
		return nil
	})
}
