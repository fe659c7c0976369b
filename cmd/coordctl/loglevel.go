package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/logging"
)

var logLevelGroup = &group{
	name:    "log-level",
	summary: "show or change the log level of every member (or one, --member ID) at runtime",
	cmds: []*command{
		{name: "", args: "[LEVEL]", summary: "without LEVEL show each member's level; with LEVEL (trace, debug, info, warn, error) set it until the next change or restart", bind: bindLogLevel},
	},
}

func bindLogLevel(fs *flag.FlagSet) func([]string) (action, error) {
	member := fs.String("member", "", "only the member with this `ID`")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 1, "[LEVEL]"); err != nil {
			return action{}, err
		}
		level := ""
		if len(args) == 1 {
			var err error
			// Checked here, so a bad level reaches no member.
			if _, level, err = logging.ParseLevel(args[0]); err != nil {
				return action{}, err
			}
		}
		m := strings.TrimSpace(*member)
		return action{what: "log-level", mutates: level != "", run: func(ctx context.Context, e *env) error {
			return runLogLevel(ctx, e, level, m)
		}}, nil
	}
}

type logLevelJSON struct {
	Member   string `json:"member"`
	Level    string `json:"level"`
	Previous string `json:"previous,omitempty"`
	Error    string `json:"error,omitempty"`
}

// runLogLevel reads or sets the level on each chosen member; a member that
// cannot be reached is reported and the command fails, the others keep
// their new level.
func runLogLevel(ctx context.Context, e *env, level, only string) error {
	members, err := e.c.Members(ctx, coordpb.ReadConsistency_STALE)
	if err != nil {
		return err
	}
	var chosen []*coordpb.Member
	for _, m := range members {
		if only == "" || m.Id == only {
			chosen = append(chosen, m)
		}
	}
	if len(chosen) == 0 {
		return fmt.Errorf("no member %q in the cluster", only)
	}
	var rows []logLevelJSON
	failed, refused := 0, 0
	for _, m := range chosen {
		row := logLevelJSON{Member: m.Id}
		var resp *coordpb.LogLevelResponse
		switch {
		case m.GrpcAddr == "":
			err = errors.New("no gRPC address registered")
		case level == "":
			resp, err = e.c.GetLogLevelAt(ctx, m.GrpcAddr)
		default:
			resp, err = e.c.SetLogLevelAt(ctx, m.GrpcAddr, level)
		}
		if err != nil {
			row.Error = describe(err, false)
			failed++
			switch status.Code(err) {
			case codes.PermissionDenied, codes.Unauthenticated:
				refused++
			}
		} else {
			row.Level, row.Previous = resp.Level, resp.Previous
		}
		rows = append(rows, row)
	}
	if e.json {
		enc := json.NewEncoder(e.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"members": rows}); err != nil {
			return err
		}
	} else {
		tw := newTable(e.out)
		fmt.Fprintln(tw, "MEMBER\tLEVEL\tPREVIOUS\tERROR")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Member, r.Level, r.Previous, r.Error)
		}
		tw.Flush()
	}
	if refused > 0 && refused == failed {
		return fmt.Errorf("%d of %d members refused (permission: see the ERROR column)", refused, len(rows))
	}
	if refused > 0 {
		return fmt.Errorf("%d of %d members refused and %d did not answer", refused, len(rows), failed-refused)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d members did not answer", failed, len(rows))
	}
	return nil
}
