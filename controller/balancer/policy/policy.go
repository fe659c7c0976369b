package policy

import (
	"errors"
	"fmt"
)

// ErrNoNodes is returned by Balance when the layout has no healthy node.
var ErrNoNodes = errors.New("no available streaming node")

// ErrInvalidLayout wraps every error caused by a malformed Layout (too many
// channels, duplicate or empty channel names, node ID 0).
var ErrInvalidLayout = errors.New("invalid balance layout")

// MaxChannels is the largest number of channels one Balance call accepts.
const MaxChannels = 65536

// Policy names accepted by New.
const (
	// VChannelFairName is the registry key of the vchannelFair policy.
	VChannelFairName = "vchannelFair"
	// DefaultPolicyName is the policy New builds for an empty name.
	DefaultPolicyName = VChannelFairName
)

// Layout is what one balance round sees.
type Layout struct {
	Channels []Channel // every PChannel
	Nodes    []uint64  // healthy nodes that may hold channels (any order; treated as a set)
	NowMs    int64     // leader wall clock, ms
}

// Channel is one PChannel as the balancer sees it.
type Channel struct {
	Name        string
	Collections []int64 // collection ID of each VChannel on this PChannel (len = VChannel count)
	// Node is the node the channel is ASSIGNED to on a healthy node, or 0 if
	// it must be placed (never assigned, ASSIGNING, UNAVAILABLE, or its node
	// is not healthy).
	Node         uint64
	LastAssignMs int64 // when it became ASSIGNED (0 if never)
}

// Policy computes the expected assignment of every channel.
type Policy interface {
	// Name is the registry key of the policy.
	Name() string
	// Balance returns the full expected assignment: every channel of the
	// layout mapped to one of its nodes. It returns ErrNoNodes when the
	// layout has no node.
	Balance(Layout) (map[string]uint64, error)
}

// builders is the policy registry. It is filled here and never written
// afterwards, so it is safe for concurrent use.
var builders = map[string]func(Config) (Policy, error){
	VChannelFairName: NewVChannelFair,
}

// New builds the policy registered under name ("" selects
// DefaultPolicyName). An unknown name or an invalid config is an error.
func New(name string, c Config) (Policy, error) {
	if name == "" {
		name = DefaultPolicyName
	}
	b, ok := builders[name]
	if !ok {
		return nil, fmt.Errorf("unknown balance policy %q", name)
	}
	return b(c)
}
