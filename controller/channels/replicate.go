package channels

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/vocab"
)

// ReplicateConfig is a replication configuration checked for shape (the
// UpdateReplicateConfiguration command built from it validated); whether
// this cluster can take it is decided against the state, by
// UpdateReplicateConfiguration.
type ReplicateConfig struct {
	cmd commands.Command
	cfg *logpb.ReplicateConfiguration
}

// NewReplicateConfig checks an API configuration.
func NewReplicateConfig(c *coordpb.ReplicateConfiguration) (ReplicateConfig, error) {
	var cfg *logpb.ReplicateConfiguration
	if c != nil {
		cfg = convertShape(c, &logpb.ReplicateConfiguration{})
	}
	cmd, err := commands.New(&logpb.UpdateReplicateConfiguration{Config: cfg}, "")
	return ReplicateConfig{cmd, cfg}, err
}

// Config is the configuration as the log records it; do not modify it.
func (c ReplicateConfig) Config() *logpb.ReplicateConfiguration { return c.cfg }

// APIReplicateConfig is an installed configuration as the API shows it
// (nil for none).
func APIReplicateConfig(c *logpb.ReplicateConfiguration) *coordpb.ReplicateConfiguration {
	if c == nil {
		return nil
	}
	return convertShape(c, &coordpb.ReplicateConfiguration{})
}

// UpdateReplicateConfiguration installs c (docs/semantics.md#replication-configuration):
// an equal configuration is done already; a secondary refuses at once
// (ErrSecondary: its configuration comes from the primary, and
// ResetReplicateRole is the operator's way out); a configuration this
// cluster cannot take is invalid; otherwise a primary broadcasts
// AlterReplicateConfig under the exclusive Cluster key to every PChannel
// (without a broadcaster it commits the configuration directly). The
// broadcaster checks the configuration again once it holds that key, and
// the broadcast's callback installs it once every PChannel has acked; the
// checks here only answer early. ErrNotInstalled when the broadcast ended
// without installing it.
func (s *Service) UpdateReplicateConfiguration(ctx context.Context, c ReplicateConfig) error {
	st := s.leader.State()
	if cur := st.ReplicateConfiguration(); cur != nil && proto.Equal(cur, c.cfg) {
		return nil
	}
	if !st.IsPrimary() {
		return fmt.Errorf("%w (cluster %s): change the configuration on the primary, "+
			"or make this cluster a primary again with ResetReplicateRole (coordctl replicate reset --reason ...)", ErrSecondary, st.ChannelsMeta().ClusterId)
	}
	if err := st.CheckReplicateConfiguration(c.cfg); err != nil {
		return vocab.Errorf(commands.ErrInvalid, "%v", err)
	}
	if s.broadcasts == nil {
		_, err := s.commit(ctx, c.cmd)
		return err
	}
	payload, err := proto.Marshal(c.cfg)
	if err != nil {
		return fmt.Errorf("encode the configuration: %w", err)
	}
	b, err := broadcaster.Check(broadcaster.Request{
		MessageType:  vocab.MsgAlterReplicateConfig,
		Payload:      payload,
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_CLUSTER}},
	})
	if err != nil {
		return err
	}
	if _, err := s.broadcasts.Broadcast(ctx, b); err != nil {
		return err
	}
	if t := s.leader.State().ReplicateConfiguration(); t == nil || !proto.Equal(t, c.cfg) {
		return fmt.Errorf("%w: the configuration broadcast completed but the configuration was not installed (see coordctl broadcast list)", ErrNotInstalled)
	}
	return nil
}

// ResetResult is the configuration a reset installed and this cluster's ID.
type ResetResult struct {
	Config    *logpb.ReplicateConfiguration
	ClusterID string
}

// ResetReplicateRole makes a secondary cluster a primary again: it commits
// ResetReplicateRole, whose Apply installs a configuration listing only
// this cluster, with the PChannels the installed configuration gives it,
// and no topology. It is an operator's decision, logged with its reason
// (which the log records too). Apply refuses a primary and runs the guard
// against the state it applies to, so a reset racing a configuration
// change cannot overwrite it; the state read here only logs.
func (s *Service) ResetReplicateRole(ctx context.Context, r ResetRole) (ResetResult, error) {
	st := s.leader.State()
	self := st.ChannelsMeta().ClusterId
	s.log.Warn("resetting the replication role to primary", "cluster", self, "reason", r.reason,
		"previous", st.ReplicateConfiguration().String())
	res, err := s.commit(ctx, r.cmd)
	if err != nil {
		return ResetResult{}, err
	}
	cfg := res.GetReplicateConfig()
	s.log.Warn("replication role reset: this cluster is a primary", "cluster", self, "reason", r.reason, "config", cfg.String())
	return ResetResult{Config: cfg, ClusterID: self}, nil
}
