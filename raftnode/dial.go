package raftnode

import "github.com/hashicorp/raft"

// StaticDialer routes raft links to the listed members through fixed
// addresses (the Jepsen-style tests put a fault-injecting proxy on every
// directed link this way). Members not listed are dialled at the address in
// the raft configuration.
type StaticDialer map[string]string

// ServerAddr implements raft.ServerAddressProvider. An error makes raft fall
// back to the configuration's address.
func (d StaticDialer) ServerAddr(id raft.ServerID) (raft.ServerAddress, error) {
	if addr, ok := d[string(id)]; ok {
		return raft.ServerAddress(addr), nil
	}
	return "", errNoOverride
}

var errNoOverride = errorString("no dial override for this member")

type errorString string

func (e errorString) Error() string { return string(e) }
