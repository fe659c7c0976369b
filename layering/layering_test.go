package layering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/coordd/coordd/"

// groups are the units of layering, most specific first: a package belongs
// to the first group its path is or lies under.
var groups = []string{
	"api/coordpb", // generated wire schema, shared by clients and servers
	// vocab: the names, limits and request shapes clients and servers share
	// (the standard library only); commands builds the log on it.
	"vocab",
	"commands", "leadership", "testutil", "binlog", "objectstore", "proc", "logging", "security", "redial",
	// durable: fdatasync for the logs that write in place (the standard
	// library only).
	"durable",
	// raftnode/datadir: a member's data dir (open, check, inspect,
	// restore), beneath the consensus wiring that runs raft on it.
	"fsm", "backup", "raftnode/datadir", "raftnode", "controller", "api", "cluster",
	"client", "streamingnode", "cmd", "jepsen-style-tests", "bench", "docs", "layering",
	// monitoring: the shipped alert rules and dashboard; tests only.
	"monitoring",
}

// allowed lists the other groups each group may import (a group may always
// import itself). A group missing here may import no other group.
var allowed = map[string][]string{
	"commands": {"vocab"},
	// leadership's errors are of vocab's Unavailable class.
	"leadership": {"vocab"},
	"fsm":        {"vocab", "commands"},
	"backup":     {"vocab", "commands", "fsm"}, // the backup file format and its summaries
	// The data dir knows the log's format (inspect replays it, restore
	// writes an entry) but nothing of a running raft.
	"raftnode/datadir": {"commands", "fsm", "durable"},
	"raftnode":         {"vocab", "commands", "fsm", "leadership", "durable", "raftnode/datadir"},
	// Controllers see the raft node only through their Leader interfaces,
	// and talk to streaming nodes with the generated clients.
	// security: coordd dials streaming nodes over mutual TLS and checks
	// that the certificate names a streaming node.
	// redial: the reconnect policy of every long-lived gRPC connection.
	"controller": {"vocab", "commands", "fsm", "leadership", "testutil", "api/coordpb", "binlog", "objectstore", "security", "redial"},
	// api/apitest waits with testutil's scaled timeouts.
	"api":     {"api/coordpb", "vocab", "commands", "fsm", "leadership", "raftnode", "raftnode/datadir", "controller", "testutil", "logging", "security", "redial"},
	"cluster": {"api/coordpb", "vocab", "commands", "leadership", "raftnode", "raftnode/datadir", "proc", "security"},
	// The SDK and the streaming node speak the public API and the shared
	// vocabulary, never the log schema: a log format change is no SDK change.
	"client":        {"api/coordpb", "vocab", "security", "redial"},
	"streamingnode": {"api/coordpb", "vocab", "client", "binlog", "objectstore", "security", "redial", "durable"},
	"cmd": {"api/coordpb", "vocab", "commands", "leadership", "fsm", "raftnode", "raftnode/datadir", "controller", "api", "cluster",
		"client", "streamingnode", "binlog", "objectstore", "backup", "logging", "security"},
	// The harness runs secure clusters: a throwaway CA (security) and the
	// bootstrap admin token's format (api/auth, in the api group). The scale
	// templates seed offline as bench/scale does: fsm.Synthetic written as a
	// backup file (fsm, backup), restored with `coordd restore`.
	"jepsen-style-tests": {"api/coordpb", "vocab", "api", "commands", "client", "cluster", "streamingnode", "testutil", "binlog", "objectstore", "proc", "security", "fsm", "backup"},
	"bench":              {"api/coordpb", "vocab", "commands", "client", "cluster", "testutil", "fsm", "backup", "proc"}, // bench/scale seeds offline: fsm.Synthetic written as a backup file; proc reads /proc
	"docs":               {},
	"monitoring":         {},
}

// apiServices are the controller packages the api group may import: the
// services that own a subsystem's requests (datapath, channels,
// membership, manifest, broadcaster, allocator) and the one wiring point,
// routines. A handler reaches a controller only through these; the
// routines' insides (balancer and its policy, nodehealth, conncache,
// flush) stay behind routines.
var apiServices = []string{
	"controller/routines", "controller/datapath", "controller/channels", "controller/membership",
	"controller/manifest", "controller/broadcaster", "controller/allocator",
}

// adapterBans are imports a package may not have although its group's row
// allows them: the gRPC handlers only adapt requests to the services'
// checked types and the services' answers to the API, so they build no log
// command, read no log record and reach no routine's memory
// (docs/architecture.md#command-flow).
var adapterBans = map[string][]string{
	"api/grpcserver": {"commands", "commands/logpb", "controller/flush"},
}

// groupOf returns the group of a coordd package path (without the module
// prefix), or "" when it is in none.
func groupOf(rel string) string {
	for _, g := range groups {
		if rel == g || strings.HasPrefix(rel, g+"/") {
			return g
		}
	}
	return ""
}

// pkg is the part of `go list -json` the rules read.
type pkg struct {
	ImportPath string
	Imports    []string
}

// violations lists every import that breaks the table, as "a imports b".
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		from := groupOf(rel)
		if from == "" {
			out = append(out, fmt.Sprintf("%s is in no layering group: add it to groups and allowed", rel))
			continue
		}
		for _, imp := range p.Imports {
			irel, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			to := groupOf(irel)
			if contains(adapterBans[rel], irel) {
				out = append(out, fmt.Sprintf("%s imports %s, which its handlers may not (adapterBans)", rel, irel))
				continue
			}
			if from == "api" && to == "controller" && !contains(apiServices, irel) {
				out = append(out, fmt.Sprintf("%s (api) imports %s, which is not a controller service (apiServices)", rel, irel))
				continue
			}
			if to == from || contains(allowed[from], to) {
				continue
			}
			out = append(out, fmt.Sprintf("%s (%s) imports %s (%s)", rel, from, irel, to))
		}
	}
	sort.Strings(out)
	return out
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestImportsPointDownward runs go list over the module and checks every
// non-test import against the table.
func TestImportsPointDownward(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH; the layering test needs go list")
	}
	cmd := exec.Command("go", "list", "-e", "-tags", "hashicorpmetrics", "-json=ImportPath,Imports", "./...")
	cmd.Dir = ".." // the module root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(outb))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages; is the test running in the module?", len(pkgs))
	}
	for _, v := range violations(pkgs) {
		t.Errorf("upward or sideways import: %s", v)
	}
}

// The rules themselves: each wrong edge the brief names is caught.
func TestViolationsCatchesWrongEdges(t *testing.T) {
	for _, tc := range []struct{ from, to string }{
		{"fsm", "raftnode"},
		{"commands", "fsm"},
		{"commands/logpb", "leadership"},
		{"controller/broadcaster", "raftnode"},
		{"controller/nodehealth", "api/grpcserver"},
		{"api/grpcserver", "cmd/coordd"},
		{"cluster", "api/grpcserver"},
		{"client", "fsm"},
		{"raftnode", "controller/allocator"},
		{"streamingnode", "jepsen-style-tests/harness"},
		// The data dir stands beneath the consensus wiring.
		{"raftnode/datadir", "raftnode"},
		{"raftnode/datadir", "leadership"},
		{"newthing", "commands"},
		// The SDK and the streaming node must not see the log schema.
		{"client", "commands"},
		{"client/clienttest", "commands/logpb"},
		{"streamingnode", "commands"},
		{"streamingnode/wal", "commands"},
		{"streamingnode/flusher", "commands/logpb"},
		// The vocabulary is the ground floor.
		{"vocab", "commands"},
		{"vocab", "api/coordpb"},
		// Handlers reach controllers through their services only.
		{"api/grpcserver", "controller/nodehealth"},
		{"api/grpcserver", "controller/balancer/policy"},
		{"api/httpgateway", "controller/conncache"},
		// The handlers only adapt: no log commands, records or flush
		// manager (adapterBans), though the api group may import them.
		{"api/grpcserver", "commands"},
		{"api/grpcserver", "commands/logpb"},
		{"api/grpcserver", "controller/flush"},
	} {
		got := violations([]pkg{{ImportPath: module + tc.from, Imports: []string{module + tc.to}}})
		if len(got) != 1 {
			t.Errorf("%s importing %s: violations %v, want one", tc.from, tc.to, got)
		}
	}
	for _, tc := range []struct{ from, to string }{
		{"fsm", "commands/logpb"},
		{"controller/balancer", "controller/balancer/policy"},
		{"controller/broadcaster", "leadership"},
		{"api/httpgateway", "api/grpcserver"},
		{"cmd/coordd", "cluster"},
		{"raftnode", "fsm"},
		{"raftnode", "raftnode/datadir"},
		{"cmd/coordd", "raftnode/datadir"},
		{"client", "vocab"},
		{"streamingnode/flusher", "vocab"},
		{"commands", "vocab"},
		{"api/grpcserver", "controller/datapath"},
		{"api/apitest", "controller/routines"},
		{"api/httpgateway", "commands/logpb"},
	} {
		if got := violations([]pkg{{ImportPath: module + tc.from, Imports: []string{module + tc.to, "fmt"}}}); len(got) != 0 {
			t.Errorf("%s importing %s: violations %v, want none", tc.from, tc.to, got)
		}
	}
}
