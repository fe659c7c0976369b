package clienttest

import (
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// The fake's assignment stream: scripted or full-view WatchAssignments.

// WatchAssignments implements coordpb.ChannelsServer: it plays the node's
// next scripted stream (see ScriptWatch).
func (n *Node) WatchAssignments(req *coordpb.WatchAssignmentsRequest, ss grpc.ServerStreamingServer[coordpb.AssignmentUpdate]) error {
	n.mu.Lock()
	var from *coordpb.Version
	if req.FromVersion != nil {
		from = proto.Clone(req.FromVersion).(*coordpb.Version)
	}
	n.watch.froms = append(n.watch.froms, from)
	n.watch.open++
	var script WatchStream
	scripted := len(n.watch.script) > 0
	if scripted {
		script = n.watch.script[0]
		n.watch.script = n.watch.script[1:]
	}
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.watch.open--
		n.mu.Unlock()
	}()
	ctx := ss.Context()
	if !scripted {
		if full := n.c.fullView(); full != nil {
			if err := ss.Send(full); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return nil
	}
	for _, u := range script.Updates {
		if err := ss.Send(u); err != nil {
			return err
		}
	}
	if script.Feed != nil {
	feed:
		for {
			select {
			case u, ok := <-script.Feed:
				if !ok {
					break feed
				}
				if err := ss.Send(u); err != nil {
					return err
				}
			case <-ctx.Done():
				return nil
			}
		}
	}
	switch {
	case script.End == nil:
		<-ctx.Done()
		return nil
	case errors.Is(script.End, ErrEndStream):
		return nil
	default:
		return script.End
	}
}

// fullView is the full assignment view of the channel state, or nil when
// it has no version.
func (c *Cluster) fullView() *coordpb.AssignmentUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := cloneState(c.ch.state)
	if s.Version == nil {
		return nil
	}
	u := &coordpb.AssignmentUpdate{Version: s.Version, Full: true, Cchannel: s.CChannel}
	if c.ch.replicate != nil {
		u.ReplicateConfig = proto.Clone(c.ch.replicate).(*coordpb.ReplicateConfiguration)
	}
	for _, nd := range s.Nodes {
		if nd.State != "DOWN" {
			u.Nodes = append(u.Nodes, nd)
		}
	}
	for _, p := range s.PChannels {
		u.Channels = append(u.Channels, &coordpb.ChannelAssignment{Pchannel: p.Name, Term: p.Term, State: p.State,
			NodeId: p.NodeId, AccessMode: p.AccessMode})
	}
	return u
}
