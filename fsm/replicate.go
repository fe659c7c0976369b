package fsm

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// applyUpdateReplicateConfiguration replaces the replication configuration
// (docs/semantics.md#replication-configuration). Equal configurations are a
// no-op. This cluster must be listed, with PChannels that all exist; a cluster
// present before may only extend its PChannel list by appending. Availability
// and role are derived from the stored configuration, so they are current on
// every replica the moment this applies, and again after any restore.
func applyUpdateReplicateConfiguration(next *State, c commands.Command) *logpb.Result {
	return updateReplicateConfiguration(next, c.Body.(*logpb.UpdateReplicateConfiguration).Config)
}

// updateReplicateConfiguration is shared with the AlterReplicateConfig
// broadcast callback.
func updateReplicateConfiguration(next *State, cfg *logpb.ReplicateConfiguration) *logpb.Result {
	old := next.ch.meta.ReplicateConfig
	if old != nil && proto.Equal(old, cfg) {
		return accepted()
	}
	if msg := next.replicateConfigProblem(cfg); msg != "" {
		return reject(logpb.RejectCode_REJECT_INVALID, "%s", msg)
	}
	next.setMeta(func(m *logpb.ChannelsMeta) { m.ReplicateConfig = proto.Clone(cfg).(*logpb.ReplicateConfiguration) })
	next.bumpVersion()
	return accepted()
}

// applyResetReplicateRole makes a secondary a primary again
// (docs/semantics.md#replication-configuration). The guard and the new
// configuration both come from the state this applies to, not from what
// the handler saw: a primary (no configuration, or no edge targets this
// cluster) is refused with REJECT_CONFLICT and nothing changes; a
// secondary gets a configuration listing only this cluster, with the
// PChannels the installed configuration gives it, and no topology. The
// result carries the configuration installed.
func applyResetReplicateRole(next *State, _ commands.Command) *logpb.Result {
	self := next.ch.meta.ClusterId
	if next.IsPrimary() {
		return reject(logpb.RejectCode_REJECT_CONFLICT,
			"cluster %s is already a primary; change its configuration with UpdateReplicateConfiguration", self)
	}
	var own []string
	if cl := next.ownReplicateCluster(); cl != nil {
		own = append(own, cl.Pchannels...)
	}
	cfg := &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: self, Pchannels: own}}}
	if msg := next.replicateConfigProblem(cfg); msg != "" {
		// Unreachable while the installed configuration was itself
		// checked on install; refuse rather than install something odd.
		return reject(logpb.RejectCode_REJECT_CONFLICT, "cannot reset the replication role: %s", msg)
	}
	next.setMeta(func(m *logpb.ChannelsMeta) { m.ReplicateConfig = cfg })
	next.bumpVersion()
	return &logpb.Result{Value: &logpb.Result_ReplicateConfig{ReplicateConfig: proto.Clone(cfg).(*logpb.ReplicateConfiguration)}}
}

// CheckReplicateConfiguration says whether cfg could be installed on this
// state (nil) or why not; the API asks before broadcasting it, so a
// configuration the callback would refuse never holds the Cluster key.
func (s *State) CheckReplicateConfiguration(cfg *logpb.ReplicateConfiguration) error {
	if msg := s.replicateConfigProblem(cfg); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return nil
}

func (s *State) replicateConfigProblem(cfg *logpb.ReplicateConfiguration) string {
	self := s.ch.meta.ClusterId
	var own *logpb.ReplicateCluster
	for _, cl := range cfg.Clusters {
		if cl.ClusterId == self {
			own = cl
		}
	}
	if own == nil {
		return fmt.Sprintf("configuration does not list this cluster %q", self)
	}
	for _, p := range own.Pchannels {
		if _, ok := s.ch.pchannels.Get(p); !ok {
			return fmt.Sprintf("configuration lists pchannel %s, which this cluster does not have", p)
		}
	}
	if old := s.ch.meta.ReplicateConfig; old != nil {
		for _, was := range old.Clusters {
			for _, now := range cfg.Clusters {
				if now.ClusterId == was.ClusterId && !isPrefix(was.Pchannels, now.Pchannels) {
					return fmt.Sprintf("cluster %s: pchannels may only be extended by appending (had %v, got %v)", was.ClusterId, was.Pchannels, now.Pchannels)
				}
			}
		}
	}
	return ""
}

func isPrefix(prefix, list []string) bool {
	if len(prefix) > len(list) {
		return false
	}
	for i := range prefix {
		if prefix[i] != list[i] {
			return false
		}
	}
	return true
}
