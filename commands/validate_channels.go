package commands

import (
	"strings"
	"unicode/utf8"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Shape limits for channel commands.
const (
	MaxAddressBytes     = 255
	MaxResourceGroupLen = 64
	MaxIncarnationBytes = 128
	MaxReplicateCluster = 64
)

// validateChannelCommand covers the 0x0100 block; ok=false means body is
// not a channel command.
func validateChannelCommand(body any) (err error, ok bool) {
	switch b := body.(type) {
	case *logpb.InitStreaming:
		if err := vocab.ValidateClusterID(b.ClusterId); err != nil {
			return invalidWrap(err), true
		}
		if len(b.Pchannels) == 0 {
			return invalid("InitStreaming needs at least one pchannel"), true
		}
		return validatePChannelList(b.Pchannels), true
	case *logpb.AddPChannels:
		if len(b.Pchannels) == 0 {
			return invalid("AddPChannels needs at least one pchannel"), true
		}
		return validatePChannelList(b.Pchannels), true
	case *logpb.AssignPChannels:
		if len(b.Assignments) == 0 || len(b.Assignments) > vocab.MaxPChannelsPerCmd {
			return invalid("AssignPChannels needs 1..%d assignments, got %d", vocab.MaxPChannelsPerCmd, len(b.Assignments)), true
		}
		seen := map[string]bool{}
		for _, a := range b.Assignments {
			if err := vocab.ValidatePChannelName(a.Pchannel); err != nil {
				return invalidWrap(err), true
			}
			if seen[a.Pchannel] {
				return invalid("pchannel %s assigned twice in one command", a.Pchannel), true
			}
			seen[a.Pchannel] = true
			if a.NodeId == 0 {
				return invalid("assignment of %s has no node", a.Pchannel), true
			}
			if a.ExpectedTerm < 1 {
				return invalid("assignment of %s: expected term must be >= 1", a.Pchannel), true
			}
			if a.Mode != logpb.AccessMode_ACCESS_RW && a.Mode != logpb.AccessMode_ACCESS_RO {
				return invalid("assignment of %s: unknown access mode %d", a.Pchannel, a.Mode), true
			}
		}
		return nil, true
	case *logpb.AssignPChannelsDone:
		return validateTermList(b.Channels), true
	case *logpb.MarkPChannelsUnavailable:
		return validateTermList(b.Channels), true
	case *logpb.RecordAssignFailure:
		if b.Channel == nil {
			return invalid("RecordAssignFailure needs a channel"), true
		}
		return validateTermList([]*logpb.PChannelTerm{b.Channel}), true
	case *logpb.RegisterStreamingNode:
		if err := vocab.ValidateAddr("address", b.Address, true); err != nil {
			return invalidWrap(err), true
		}
		if len(b.ResourceGroup) > MaxResourceGroupLen {
			return invalid("resource group is %d bytes (max %d)", len(b.ResourceGroup), MaxResourceGroupLen), true
		}
		// Operators read resource groups in `coordctl node list`: no
		// terminal escapes, no characters that hide what the name says.
		if !utf8.ValidString(b.ResourceGroup) {
			return invalid("resource group %q is not valid UTF-8", b.ResourceGroup), true
		}
		if r, bad := vocab.FirstInvisible(b.ResourceGroup); bad {
			return invalid("resource group %q contains a control or invisible character (%U)", b.ResourceGroup, r), true
		}
		if b.Incarnation == "" || len(b.Incarnation) > MaxIncarnationBytes {
			return invalid("incarnation must be 1..%d bytes", MaxIncarnationBytes), true
		}
		return nil, true
	case *logpb.MarkStreamingNodeDown:
		if b.NodeId == 0 {
			return invalid("node id must be positive"), true
		}
		return checkReason(b.Reason), true
	case *logpb.SetStreamingNodeDrain:
		if b.NodeId == 0 {
			return invalid("node id must be positive"), true
		}
		return checkReason(b.Reason), true
	case *logpb.AllocVirtualChannels:
		return invalidWrap(vocab.ValidateVChannelAlloc(b.CollectionId, b.Count)), true
	case *logpb.DropVirtualChannels:
		return invalidWrap(vocab.ValidateCollectionID(b.CollectionId)), true
	case *logpb.UpdateReplicateConfiguration:
		return ValidateReplicateConfiguration(b.Config), true
	case *logpb.ResetReplicateRole:
		if strings.TrimSpace(b.Reason) == "" {
			return invalid("a replication role reset needs a reason"), true
		}
		return checkReason(b.Reason), true
	}
	return nil, false
}

func validatePChannelList(names []string) error {
	if len(names) > vocab.MaxPChannelsPerCmd {
		return invalid("%d pchannels in one command (max %d)", len(names), vocab.MaxPChannelsPerCmd)
	}
	seen := map[string]bool{}
	for _, n := range names {
		if err := vocab.ValidatePChannelName(n); err != nil {
			return invalidWrap(err)
		}
		if seen[n] {
			return invalid("pchannel %s listed twice", n)
		}
		seen[n] = true
	}
	return nil
}

func validateTermList(items []*logpb.PChannelTerm) error {
	if len(items) == 0 || len(items) > vocab.MaxPChannelsPerCmd {
		return invalid("need 1..%d channels, got %d", vocab.MaxPChannelsPerCmd, len(items))
	}
	for _, it := range items {
		if err := vocab.ValidatePChannelName(it.Pchannel); err != nil {
			return invalidWrap(err)
		}
		if it.Term < 1 {
			return invalid("term of %s must be >= 1, got %d", it.Pchannel, it.Term)
		}
		if err := checkReason(it.Reason); err != nil {
			return err
		}
	}
	return nil
}

func checkReason(r string) error { return invalidWrap(vocab.ValidateReason(r)) }

// ValidateReplicateConfiguration checks a configuration's shape: unique,
// valid cluster IDs; valid, unique pchannels per cluster; every cluster
// with the same number of pchannels; topology edges between listed,
// distinct clusters, each target with at most one source.
func ValidateReplicateConfiguration(c *logpb.ReplicateConfiguration) error {
	if c == nil {
		return invalid("replicate configuration is missing")
	}
	if len(c.Clusters) == 0 || len(c.Clusters) > MaxReplicateCluster {
		return invalid("replicate configuration needs 1..%d clusters, got %d", MaxReplicateCluster, len(c.Clusters))
	}
	ids := map[string]bool{}
	n := -1
	for _, cl := range c.Clusters {
		if err := vocab.ValidateClusterID(cl.ClusterId); err != nil {
			return invalidWrap(err)
		}
		if ids[cl.ClusterId] {
			return invalid("cluster %s listed twice", cl.ClusterId)
		}
		ids[cl.ClusterId] = true
		if len(cl.Pchannels) == 0 {
			return invalid("cluster %s lists no pchannels", cl.ClusterId)
		}
		if err := validatePChannelList(cl.Pchannels); err != nil {
			return invalid("cluster %s: %v", cl.ClusterId, err)
		}
		if n >= 0 && len(cl.Pchannels) != n {
			return invalid("every cluster must list the same number of pchannels (%s lists %d, others %d)", cl.ClusterId, len(cl.Pchannels), n)
		}
		n = len(cl.Pchannels)
	}
	targets := map[string]bool{}
	for _, e := range c.Topology {
		if !ids[e.SourceClusterId] || !ids[e.TargetClusterId] {
			return invalid("topology edge %s->%s names an unlisted cluster", e.SourceClusterId, e.TargetClusterId)
		}
		if e.SourceClusterId == e.TargetClusterId {
			return invalid("topology edge %s->%s is a self loop", e.SourceClusterId, e.TargetClusterId)
		}
		if targets[e.TargetClusterId] {
			return invalid("cluster %s has more than one source", e.TargetClusterId)
		}
		targets[e.TargetClusterId] = true
	}
	return nil
}
