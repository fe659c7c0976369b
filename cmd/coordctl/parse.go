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

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/vocab"
)

const (
	defaultEndpoints = "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
	envEndpoints     = "COORDD_ENDPOINTS"
)

// globals are the flags every command accepts, before or after its name.
type globals struct {
	endpoints    string
	endpointsSrc string // where endpoints came from, for error messages
	output       string
	timeout      time.Duration
	tls          tlsFlags

	endpointList []string // parsed from endpoints by check
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.endpoints, "endpoints", g.endpoints, "comma-separated gRPC `host:port` list (env "+envEndpoints+")")
	fs.StringVar(&g.output, "o", g.output, "output `format`: table or json")
	fs.StringVar(&g.output, "output", g.output, "same as -o")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "bound on each request, retries included; one attempt gets half (insert: plus 1s per 1,000 rows)")
	g.tls.register(fs)
}

// noteSource records that --endpoints was given on the command line.
func (g *globals) noteSource(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "endpoints" {
			g.endpointsSrc = "--endpoints"
		}
	})
}

func (g *globals) check() error {
	for _, e := range strings.Split(g.endpoints, ",") {
		e = strings.TrimSpace(e)
		if err := client.ValidateEndpoint(e); err != nil {
			return fmt.Errorf("%s (from %s)", err, g.endpointsSrc)
		}
		g.endpointList = append(g.endpointList, e)
	}
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("bad output format %q: want table or json", g.output)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("bad --timeout %v: must be positive", g.timeout)
	}
	return g.tls.check()
}

// env is what a command runs with.
type env struct {
	c       *client.Client
	out     io.Writer
	errOut  io.Writer
	json    bool
	timeout time.Duration // --timeout: the bound on each request
}

// action is a parsed, validated command ready to run.
type action struct {
	what    string // names the request in error messages: "cluster status"
	mutates bool   // changes the cluster (warn on unknown outcomes)
	run     func(ctx context.Context, e *env) error
}

// command is one leaf of the command tree. bind registers the command's own
// flags and returns the function that checks its positional arguments.
type command struct {
	name    string
	args    string
	summary string
	// notes, if any, follow the summary in the command's --help: what the
	// summary line has no room for, such as the deadlines it implies.
	notes string
	bind  func(fs *flag.FlagSet) func(args []string) (action, error)
}

type group struct {
	name    string
	summary string
	cmds    []*command
}

var groups = []*group{clusterGroup, tokenGroup, snapshotGroup, allocGroup, pchannelGroup, nodeGroup, vchannelGroup, assignmentGroup, replicateGroup, broadcastGroup,
	insertGroup, flushGroup, segmentGroup, manifestGroup, checkpointGroup, recoveryInfoGroup, binlogGroup, logLevelGroup, debugGroup}

// invocation is a parsed command line.
type invocation struct {
	g   *globals
	act action
}

// helpRequest carries usage text the user asked for (exit 0, stdout).
type helpRequest struct{ text string }

func (h *helpRequest) Error() string { return "help requested" }

// parse turns args into an invocation, or returns a *helpRequest or a
// one-line usage error. It never contacts a server.
func parse(args []string, getenv func(string) string) (*invocation, error) {
	g := &globals{endpoints: defaultEndpoints, endpointsSrc: "the default", output: "table", timeout: 5 * time.Second}
	if v := strings.TrimSpace(getenv(envEndpoints)); v != "" {
		g.endpoints, g.endpointsSrc = v, envEndpoints
	}
	g.tls.fromEnv(getenv)

	if isVersionFlag(args) {
		err, _ := localCommand(append([]string{"version"}, args[1:]...), g)
		return nil, err
	}
	root := newFlagSet("coordctl", g)
	rest, err := parseFlags(root, args, false)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &helpRequest{mainUsage()}
		}
		return nil, err
	}
	if len(rest) == 0 {
		return nil, errors.New("missing command (run 'coordctl help')")
	}
	if rest[0] == "help" {
		return nil, helpFor(rest[1:])
	}
	if err, ok := localCommand(rest, g); ok {
		return nil, err
	}
	grp := findGroup(rest[0])
	if grp == nil {
		return nil, fmt.Errorf("unknown command %q%s (run 'coordctl help')", rest[0], didYouMeanTop(rest[0]))
	}

	gfs := newFlagSet("coordctl "+grp.name, g)
	cmd, cmdArgs := directCommand(grp), rest[1:]
	if cmd == nil {
		rest, err = parseFlags(gfs, rest[1:], false)
		if err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{groupUsage(grp)}
			}
			return nil, fmt.Errorf("%s: %w", grp.name, err)
		}
		if len(rest) == 0 {
			return nil, fmt.Errorf("%s: missing command (run 'coordctl %s --help')", grp.name, grp.name)
		}
		if rest[0] == "help" {
			return nil, &helpRequest{groupUsage(grp)}
		}
		cmd = findCommand(grp, rest[0])
		if cmd == nil {
			return nil, fmt.Errorf("%s: unknown command %q%s (run 'coordctl %s --help')", grp.name, rest[0], didYouMean(rest[0], commandNames(grp)), grp.name)
		}
		cmdArgs = rest[1:]
	}

	name := strings.TrimSpace(grp.name + " " + cmd.name)
	cfs := newFlagSet("coordctl "+name, g)
	checkArgs := cmd.bind(cfs)
	pos, err := parseFlags(cfs, cmdArgs, true)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, &helpRequest{commandUsage(grp, cmd, cfs)}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, fs := range []*flag.FlagSet{root, gfs, cfs} {
		g.noteSource(fs)
	}
	if err := g.check(); err != nil {
		return nil, err
	}
	act, err := checkArgs(pos)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &invocation{g: g, act: act}, nil
}

func newFlagSet(name string, g *globals) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported by run, in one line
	g.register(fs)
	return fs
}

// parseFlags parses fs from args. Without interleave it stops at the first
// positional argument and returns it and the rest; with interleave, flags
// may follow positional arguments and only the positionals are returned.
// Either way a negative number ("-1") is an argument, not a flag, so that
// it is reported by the argument check.
func parseFlags(fs *flag.FlagSet, args []string, interleave bool) ([]string, error) {
	var pos []string
	for i := 0; i < len(args); {
		a := args[i]
		if a == "--" {
			return append(pos, args[i+1:]...), nil
		}
		if !isFlag(a) {
			if !interleave {
				return append(pos, args[i:]...), nil
			}
			pos = append(pos, a)
			i++
			continue
		}
		n := 1 // the flag alone; 2 when its value is the next argument
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") {
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				n = 2
			}
		}
		if err := fs.Parse(args[i : i+n]); err != nil {
			return nil, explainFlagError(fs, err)
		}
		i += n
	}
	return pos, nil
}

func isFlag(a string) bool {
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(a, 64)
	return err != nil
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func findGroup(name string) *group {
	for _, g := range groups {
		if g.name == name {
			return g
		}
	}
	return nil
}

// directCommand is the command of a group that is a command itself
// (coordctl insert, flush, recovery-info): its only command has no name.
func directCommand(g *group) *command {
	if len(g.cmds) == 1 && g.cmds[0].name == "" {
		return g.cmds[0]
	}
	return nil
}

func findCommand(g *group, name string) *command {
	for _, c := range g.cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

func helpFor(args []string) error {
	if len(args) == 0 {
		return &helpRequest{mainUsage()}
	}
	grp := findGroup(args[0])
	if grp == nil {
		return fmt.Errorf("help: unknown command %q (run 'coordctl help')", args[0])
	}
	if cmd := directCommand(grp); cmd != nil {
		fs := newFlagSet("", &globals{})
		cmd.bind(fs)
		return &helpRequest{commandUsage(grp, cmd, fs)}
	}
	if len(args) > 1 {
		if cmd := findCommand(grp, args[1]); cmd != nil {
			fs := newFlagSet("", &globals{})
			cmd.bind(fs)
			return &helpRequest{commandUsage(grp, cmd, fs)}
		}
		return fmt.Errorf("help: unknown command %q %q", args[0], args[1])
	}
	return &helpRequest{groupUsage(grp)}
}

// wantArgs checks the positional argument count.
func wantArgs(args []string, min, max int, names string) error {
	if len(args) < min || len(args) > max {
		return fmt.Errorf("want %s, got %d argument(s)", names, len(args))
	}
	return nil
}

// oneArg parses the one argument of a command that takes exactly one,
// named name in the error when it is missing or not alone.
func oneArg[T any](args []string, name string, parse func(string) (T, error)) (T, error) {
	if err := wantArgs(args, 1, 1, name); err != nil {
		var zero T
		return zero, err
	}
	return parse(args[0])
}

// requiredReason checks a required --reason: not blank, and within the
// size the server keeps.
func requiredReason(reason string) (string, error) {
	if strings.TrimSpace(reason) == "" {
		return "", errors.New("--reason is required")
	}
	if len(reason) > vocab.MaxReasonBytes {
		return "", fmt.Errorf("--reason is %d bytes (max %d)", len(reason), vocab.MaxReasonBytes)
	}
	return reason, nil
}
