package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/vocab"
)

var pchannelGroup = &group{
	name:    "pchannel",
	summary: "inspect and manage physical channels (WALs) and their assignment",
	cmds: []*command{
		{name: "list", summary: "list pchannels with their state, term and node (--stale reads any node's replica)", bind: bindPChannelList},
		{name: "add", args: "NAME...", summary: "create pchannels (idempotent; pchannels are never removed)", bind: bindPChannelAdd},
		{name: "rebalance", summary: "ask the leader's balancer for a round now", bind: bindRebalance},
	},
}

var nodeGroup = &group{
	name:    "node",
	summary: "inspect and drain streaming nodes",
	cmds: []*command{
		{name: "list", summary: "list live streaming nodes (--all adds DOWN ones; --stale reads any node's replica)", bind: bindNodeList},
		{name: "drain", args: "ID", summary: "move a streaming node's pchannels off it and give it no new ones", bind: bindDrain(true)},
		{name: "undrain", args: "ID", summary: "let a draining streaming node take pchannels again", bind: bindDrain(false)},
	},
}

var vchannelGroup = &group{
	name:    "vchannel",
	summary: "allocate, list and drop collections' virtual channels",
	cmds: []*command{
		{name: "alloc", args: "COLLECTION_ID N", summary: "allocate N vchannels (on N distinct pchannels) for a collection", bind: bindVAlloc},
		{name: "list", args: "[COLLECTION_ID]", summary: "list the vchannels of one collection, or of all", bind: bindVList},
		{name: "drop", args: "COLLECTION_ID", summary: "forget a collection's vchannels", bind: bindVDrop},
	},
}

// consistencyOf maps --stale to a read consistency.
func consistencyOf(stale bool) coordpb.ReadConsistency {
	if stale {
		return coordpb.ReadConsistency_STALE
	}
	return coordpb.ReadConsistency_LINEARIZABLE
}

func bindPChannelList(fs *flag.FlagSet) func([]string) (action, error) {
	stale := fs.Bool("stale", false, "serve from the answering node's replica instead of the leader")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		consistency := consistencyOf(*stale)
		return action{what: "pchannel list", run: func(ctx context.Context, e *env) error {
			resp, err := e.c.ListPChannels(ctx, consistency)
			if err != nil {
				return err
			}
			return printPChannels(e, resp, *stale)
		}}, nil
	}
}

// printPChannels shows each PChannel with its owner's state (OWNER):
// UP, DRAINING, SILENT or DOWN; a PChannel under a SILENT or DOWN owner
// cannot take writes whatever its own state (docs/operations.md#silent-streaming-nodes).
// A stale read may come from a follower, which cannot know SILENT.
func printPChannels(e *env, resp *coordpb.ListPChannelsResponse, stale bool) error {
	out := pchannelsJSON{PChannels: []pchannelJSON{}, CChannel: resp.GetCchannel(), Version: toVersionJSON(resp.GetVersion())}
	for _, p := range resp.GetPchannels() {
		out.PChannels = append(out.PChannels, pchannelJSON{
			Name: p.GetName(), Term: p.GetTerm(), State: p.GetState(), NodeID: p.GetNodeId(), NodeAddress: p.GetNodeAddress(),
			OwnerState: p.GetOwnerState(), AccessMode: p.GetAccessMode(), AvailableInReplication: p.GetAvailableInReplication(),
			VChannelCount: p.GetVchannelCount(), LastAssignUnixMs: p.GetLastAssignUnixMs(),
			LastError: p.GetLastError(), FailedAttempts: p.GetFailedAttempts(),
		})
	}
	return e.show(out, func(w io.Writer) error {
		tw := newTable(w)
		fmt.Fprintln(tw, "NAME\tTERM\tSTATE\tNODE\tOWNER\tADDRESS\tVCHANNELS\tLAST ERROR")
		cannot := 0
		for _, p := range resp.GetPchannels() {
			owner := p.GetOwnerState()
			if owner == "SILENT" || owner == "DOWN" {
				cannot++
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", p.GetName(), p.GetTerm(), dash(p.GetState()), nodeID(p.GetNodeId()),
				dash(owner), dash(p.GetNodeAddress()), p.GetVchannelCount(), dash(oneLine(p.GetLastError())))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "\nCChannel %s; assignment version %s.\n", dash(resp.GetCchannel()), versionString(resp.GetVersion())); err != nil {
			return err
		}
		if cannot > 0 {
			if _, err := fmt.Fprintf(w, "%d pchannel(s) under a SILENT or DOWN owner cannot take writes until it heartbeats again or the node TTL moves them.\n", cannot); err != nil {
				return err
			}
		}
		if stale {
			_, err := fmt.Fprintln(w, "Read with --stale: a follower's OWNER never says SILENT (only the leader knows heartbeats).")
			return err
		}
		return nil
	})
}

func bindPChannelAdd(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if len(args) == 0 {
			return action{}, errors.New("want NAME..., got 0 arguments")
		}
		if len(args) > vocab.MaxPChannelsPerCmd {
			return action{}, fmt.Errorf("%d names (max %d per call)", len(args), vocab.MaxPChannelsPerCmd)
		}
		seen := map[string]bool{}
		for _, n := range args {
			if err := trimInvalid(vocab.ValidatePChannelName(n)); err != nil {
				return action{}, err
			}
			if seen[n] {
				return action{}, fmt.Errorf("pchannel %s listed twice", n)
			}
			seen[n] = true
		}
		names := append([]string(nil), args...)
		return action{what: "pchannel add", mutates: true, run: func(ctx context.Context, e *env) error {
			added, err := e.c.AddPChannels(ctx, names)
			if err != nil {
				return err
			}
			return e.show(addedJSON{Added: added, Existing: uint32(len(names)) - added}, sentence("Added %d pchannel(s); %d already existed.\n", added, uint32(len(names))-added))
		}}, nil
	}
}

func bindRebalance(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		return action{what: "pchannel rebalance", run: func(ctx context.Context, e *env) error {
			resp, err := e.c.RebalanceReport(ctx)
			if err != nil {
				return err
			}
			return e.show(rebalanceJSONOf(resp), func(w io.Writer) error { return printRebalance(w, resp, time.Now()) })
		}}, nil
	}
}

func bindNodeList(fs *flag.FlagSet) func([]string) (action, error) {
	stale := fs.Bool("stale", false, "serve from the answering node's replica instead of the leader")
	all := fs.Bool("all", false, "also list DOWN nodes (whose session ended)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		consistency, includeDown := consistencyOf(*stale), *all
		return action{what: "node list", run: fetched(func(ctx context.Context, c *client.Client) ([]*coordpb.StreamingNode, error) {
			return c.ListNodes(ctx, consistency, includeDown)
		}, toNodesJSON, writeNodesTable)}, nil
	}
}

func bindDrain(drain bool) func(*flag.FlagSet) func([]string) (action, error) {
	return func(fs *flag.FlagSet) func([]string) (action, error) {
		var reason *string
		if drain {
			reason = fs.String("reason", "", "why the node is drained (default \"operator request\")")
		}
		return func(args []string) (action, error) {
			id, err := oneArg(args, "ID", parseNodeID)
			if err != nil {
				return action{}, err
			}
			why, verb := "", "undrain"
			if drain {
				why, verb = *reason, "drain"
				if len(why) > vocab.MaxReasonBytes {
					return action{}, fmt.Errorf("--reason is %d bytes (max %d)", len(why), vocab.MaxReasonBytes)
				}
			}
			return action{what: fmt.Sprintf("%s node %d", verb, id), mutates: true, run: func(ctx context.Context, e *env) error {
				n, err := e.c.DrainNode(ctx, id, drain, why)
				if err != nil {
					return err
				}
				return e.show(drainJSON{Node: toNodeJSON(n)}, func(w io.Writer) error {
					msg := fmt.Sprintf("Node %d is %s", id, n.GetState())
					if drain && n.GetReason() != "" {
						msg += " (" + oneLine(n.GetReason()) + ")"
					}
					fmt.Fprintf(w, "%s.\n\n", msg)
					return writeNodesTable(w, []*coordpb.StreamingNode{n})
				})
			}}, nil
		}
	}
}

// writeNodesTable lists nodes with one PChannel per line (a node holding
// 16 channels takes 16 short lines, not one 400-character one); the node's
// own cells are on its first line. The reason is shown only for a node that
// is not UP (an undrained node keeps its old drain reason in the log).
func writeNodesTable(w io.Writer, nodes []*coordpb.StreamingNode) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tADDRESS\tGROUP\tSTATE\tEPOCH\tPCHANNELS\tHEARTBEAT\tREASON")
	for _, n := range nodes {
		hb := "-"
		if ms := n.GetLastHeartbeatMsAgo(); ms >= 0 {
			hb = (time.Duration(ms) * time.Millisecond).String() + " ago"
		}
		reason := n.GetReason()
		if n.GetState() == "UP" {
			reason = ""
		}
		pcs := n.GetPchannels()
		first := "-"
		if len(pcs) > 0 {
			first = fmt.Sprintf("%s (%d)", pcs[0], len(pcs))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", n.GetId(), dash(n.GetAddress()), dash(n.GetResourceGroup()),
			dash(n.GetState()), n.GetEpoch(), first, hb, dash(oneLine(reason)))
		for _, p := range pcs[min(1, len(pcs)):] {
			fmt.Fprintf(tw, "\t\t\t\t\t%s\t\t\n", p)
		}
	}
	return tw.Flush()
}

func bindVAlloc(fs *flag.FlagSet) func([]string) (action, error) {
	requestID := fs.String("request-id", "", "deduplication `ID`: repeating a call with it returns the first result (default: random)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 2, 2, "COLLECTION_ID N"); err != nil {
			return action{}, err
		}
		coll, err := parseCollectionID(args[0])
		if err != nil {
			return action{}, err
		}
		n, err := strconv.ParseUint(args[1], 10, 32)
		if err != nil || n == 0 || n > vocab.MaxVChannelsPerColl {
			//lint:ignore ST1005 N is the argument's name in the usage text
			return action{}, fmt.Errorf("N must be an integer in 1..%d, got %q", vocab.MaxVChannelsPerColl, args[1])
		}
		if err := checkRequestID(*requestID); err != nil {
			return action{}, err
		}
		rid := *requestID
		return action{what: "vchannel alloc", mutates: true, run: func(ctx context.Context, e *env) error {
			vs, err := e.c.AllocVirtualChannels(ctx, coll, uint32(n), rid)
			if err != nil {
				return err
			}
			return e.show(vchannelsJSON{VChannels: append([]string{}, vs...)}, func(w io.Writer) error {
				return writeVChannelsTable(e, []*coordpb.CollectionVChannels{{CollectionId: coll, Vchannels: vs}})
			})
		}}, nil
	}
}

func bindVList(fs *flag.FlagSet) func([]string) (action, error) {
	stale := fs.Bool("stale", false, "serve from the answering node's replica instead of the leader")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 1, "at most one COLLECTION_ID"); err != nil {
			return action{}, err
		}
		var coll int64
		if len(args) == 1 {
			var err error
			if coll, err = parseCollectionID(args[0]); err != nil {
				return action{}, err
			}
		}
		consistency := consistencyOf(*stale)
		return action{what: "vchannel list", run: func(ctx context.Context, e *env) error {
			cs, err := e.c.ListVirtualChannels(ctx, consistency, coll)
			if err != nil {
				return err
			}
			out := collectionsJSON{Collections: []collectionJSON{}}
			for _, c := range cs {
				out.Collections = append(out.Collections, collectionJSON{CollectionID: c.GetCollectionId(),
					VChannels: append([]string{}, c.GetVchannels()...)})
			}
			return e.show(out, func(w io.Writer) error {
				return writeVChannelsTable(e, cs)
			})
		}}, nil
	}
}

func writeVChannelsTable(e *env, cs []*coordpb.CollectionVChannels) error {
	tw := newTable(e.out)
	fmt.Fprintln(tw, "COLLECTION\tVCHANNEL\tPCHANNEL")
	for _, c := range cs {
		for _, v := range c.GetVchannels() {
			fmt.Fprintf(tw, "%d\t%s\t%s\n", c.GetCollectionId(), v, vocab.PChannelOf(v))
		}
	}
	return tw.Flush()
}

func bindVDrop(fs *flag.FlagSet) func([]string) (action, error) {
	requestID := fs.String("request-id", "", "deduplication `ID` (default: random)")
	return func(args []string) (action, error) {
		coll, err := oneArg(args, "COLLECTION_ID", parseCollectionID)
		if err != nil {
			return action{}, err
		}
		if err := checkRequestID(*requestID); err != nil {
			return action{}, err
		}
		rid := *requestID
		return action{what: "vchannel drop", mutates: true, run: func(ctx context.Context, e *env) error {
			if err := e.c.DropVirtualChannels(ctx, coll, rid); err != nil {
				return err
			}
			return e.show(droppedJSON{CollectionID: coll, Dropped: true}, sentence("Dropped the vchannels of collection %d.\n", coll))
		}}, nil
	}
}

// parseNodeID accepts a positive decimal streaming node ID.
func parseNodeID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("node ID must be a positive integer, got %q", s)
	}
	return id, nil
}

// parseCollectionID accepts a positive decimal collection ID.
func parseCollectionID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("COLLECTION_ID must be a positive integer, got %q", s)
	}
	return id, nil
}

func checkRequestID(id string) error {
	if err := vocab.ValidateRequestID(id); err != nil {
		return fmt.Errorf("--request-id: %s", strings.TrimPrefix(err.Error(), commands.ErrInvalid.Error()+": "))
	}
	return nil
}

func nodeID(id uint64) string {
	if id == 0 {
		return "-"
	}
	return strconv.FormatUint(id, 10)
}

func versionString(v *coordpb.Version) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%d.%d", v.GetGlobal(), v.GetLocal())
}
