package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

var replicateGroup = &group{
	name:    "replicate",
	summary: "show and change the cross-cluster replication configuration",
	cmds: []*command{
		{name: "get", summary: "show the replication configuration, this cluster's ID and its role", bind: bindReplicateGet},
		{name: "set", args: "FILE", summary: "replace the replication configuration with FILE (a ReplicateConfiguration in protojson form)", bind: bindReplicateSet},
		{name: "reset", summary: "make a secondary cluster a primary again (--reason required): only this cluster stays in the configuration", bind: bindReplicateReset},
	},
}

func bindReplicateGet(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		return action{what: "replicate get", run: func(ctx context.Context, e *env) error {
			resp, err := e.c.GetReplicateConfiguration(ctx)
			if err != nil {
				return err
			}
			if e.json {
				return writeJSON(e.out, replicateGetJSON{ClusterID: resp.GetClusterId(), Role: resp.GetRole(), Config: toReplicateJSON(resp.GetConfig())})
			}
			fmt.Fprintf(e.out, "Cluster %s (%s).\n\n", dash(resp.GetClusterId()), dash(resp.GetRole()))
			return writeReplicateTable(e, resp.GetConfig())
		}}, nil
	}
}

func writeReplicateTable(e *env, c *coordpb.ReplicateConfiguration) error {
	if c == nil {
		_, err := fmt.Fprintln(e.out, "No replication configuration.")
		return err
	}
	tw := newTable(e.out)
	fmt.Fprintln(tw, "CLUSTER\tSOURCE\tPCHANNELS")
	for _, cl := range c.GetClusters() {
		src := "-"
		for _, t := range c.GetTopology() {
			if t.GetTargetClusterId() == cl.GetClusterId() {
				src = t.GetSourceClusterId()
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", cl.GetClusterId(), src, dash(strings.Join(cl.GetPchannels(), ",")))
	}
	return tw.Flush()
}

func bindReplicateSet(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "FILE"); err != nil {
			return action{}, err
		}
		cfg, err := readReplicateConfig(args[0])
		if err != nil {
			return action{}, err
		}
		return action{what: "replicate set", mutates: true, run: func(ctx context.Context, e *env) error {
			if err := e.c.UpdateReplicateConfiguration(ctx, cfg); err != nil {
				return err
			}
			if e.json {
				return writeJSON(e.out, replicateSetJSON{Updated: true, Config: toReplicateJSON(cfg)})
			}
			fmt.Fprintf(e.out, "Replication configuration updated (%d clusters, %d topology edges).\n\n", len(cfg.GetClusters()), len(cfg.GetTopology()))
			return writeReplicateTable(e, cfg)
		}}, nil
	}
}

func bindReplicateReset(fs *flag.FlagSet) func([]string) (action, error) {
	reason := fs.String("reason", "", "why the role is reset (`TEXT`, required; logged by the leader)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		if strings.TrimSpace(*reason) == "" {
			return action{}, errors.New("--reason is required")
		}
		if len(*reason) > vocab.MaxReasonBytes {
			return action{}, fmt.Errorf("--reason is %d bytes (max %d)", len(*reason), vocab.MaxReasonBytes)
		}
		r := *reason
		return action{what: "replicate reset", mutates: true, run: func(ctx context.Context, e *env) error {
			resp, err := e.c.ResetReplicateRole(ctx, r)
			if err != nil {
				return err
			}
			if e.json {
				return writeJSON(e.out, replicateGetJSON{ClusterID: resp.GetClusterId(), Role: resp.GetRole(), Config: toReplicateJSON(resp.GetConfig())})
			}
			fmt.Fprintf(e.out, "Cluster %s is a primary again (%s).\n\n", dash(resp.GetClusterId()), dash(resp.GetRole()))
			return writeReplicateTable(e, resp.GetConfig())
		}}, nil
	}
}

// readReplicateConfig reads and checks FILE before anything is sent, with
// the same rules the server applies.
func readReplicateConfig(file string) (*coordpb.ReplicateConfiguration, error) {
	if file == "" {
		return nil, fmt.Errorf("FILE is empty")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	cfg := &coordpb.ReplicateConfiguration{}
	if err := protojson.Unmarshal(b, cfg); err != nil {
		return nil, fmt.Errorf("%s: not a ReplicateConfiguration in protojson form: %v", file, err)
	}
	lc := &logpb.ReplicateConfiguration{}
	for _, cl := range cfg.Clusters {
		lc.Clusters = append(lc.Clusters, &logpb.ReplicateCluster{ClusterId: cl.ClusterId, Pchannels: cl.Pchannels})
	}
	for _, t := range cfg.Topology {
		lc.Topology = append(lc.Topology, &logpb.ReplicateTopology{SourceClusterId: t.SourceClusterId, TargetClusterId: t.TargetClusterId})
	}
	if err := trimInvalid(commands.ValidateReplicateConfiguration(lc)); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	return cfg, nil
}
