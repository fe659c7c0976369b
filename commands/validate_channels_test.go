package commands

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

const (
	pc0 = "by-dev-rootcoord-dml_0"
	pc1 = "by-dev-rootcoord-dml_1"
	pc2 = "by-dev-rootcoord-dml_2"
)

var (
	// nameLongest is the longest valid pchannel name: a 128-byte prefix
	// and the largest index (the prefix limit binds before
	// vocab.MaxChannelNameBytes does).
	nameLongest = strings.Repeat("p", 128) + "_2147483647"
	// name129 has a prefix one byte too long.
	name129 = strings.Repeat("p", 129) + "_7"
	// name201 is over vocab.MaxChannelNameBytes.
	name201 = strings.Repeat("p", vocab.MaxChannelNameBytes-1) + "_7"
)

// badPChannelNames are rejected by vocab.ValidatePChannelName wherever a
// command carries a pchannel name.
var badPChannelNames = []struct{ name, value string }{
	{"empty", ""},
	{"no index", "x"},
	{"empty index", "p_"},
	{"leading zero", "p_01"},
	{"negative index", "p_-1"},
	{"space in prefix", "a b_1"},
	{"201 bytes", name201},
	{"129-byte prefix", name129},
	{"empty prefix", "_1"},
	{"prefix ends with underscore", "p__1"},
	{"index not a number", "p_x"},
	{"index with plus", "p_+1"},
	{"index over 31 bits", "p_2147483648"},
	{"control channel", pc0 + vocab.CChannelSuffix},
	{"vchannel", pc0 + "_12v0"},
	{"non-ASCII", "pö_1"},
}

// pchannels returns n valid, distinct pchannel names.
func pchannels(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = vocab.PChannelName("dml", i)
	}
	return out
}

func TestValidateInitStreaming(t *testing.T) {
	tests := []validateCase{
		{"ok", &logpb.InitStreaming{ClusterId: "by-dev", Pchannels: []string{pc0, pc1}}, ""},
		{"one pchannel", &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{pc0}}, ""},
		{"longest name", &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{nameLongest}}, ""},
		{"max pchannels", &logpb.InitStreaming{ClusterId: "c", Pchannels: pchannels(vocab.MaxPChannelsPerCmd)}, ""},
		{"cluster id of 64 bytes", &logpb.InitStreaming{ClusterId: strings.Repeat("c", 64), Pchannels: []string{pc0}}, ""},
		{"no cluster id", &logpb.InitStreaming{Pchannels: []string{pc0}}, "cluster id must be 1..64 bytes, got 0"},
		{"cluster id of 65 bytes", &logpb.InitStreaming{ClusterId: strings.Repeat("c", 65), Pchannels: []string{pc0}}, "got 65"},
		{"bad cluster id", &logpb.InitStreaming{ClusterId: "by dev", Pchannels: []string{pc0}}, `character ' ' not allowed`},
		{"no pchannels", &logpb.InitStreaming{ClusterId: "c"}, "needs at least one pchannel"},
		{"too many pchannels", &logpb.InitStreaming{ClusterId: "c", Pchannels: pchannels(vocab.MaxPChannelsPerCmd + 1)}, "4097 pchannels in one command (max 4096)"},
		{"duplicate", &logpb.InitStreaming{ClusterId: "c", Pchannels: []string{pc0, pc1, pc0}}, "listed twice"},
	}
	for _, bad := range badPChannelNames {
		tests = append(tests, validateCase{"bad name/" + bad.name,
			&logpb.InitStreaming{ClusterId: "c", Pchannels: []string{pc0, bad.value}}, "pchannel name"})
	}
	runValidateCases(t, tests)
}

func TestValidateAddPChannels(t *testing.T) {
	tests := []validateCase{
		{"ok", &logpb.AddPChannels{Pchannels: []string{pc0, pc1}}, ""},
		{"max pchannels", &logpb.AddPChannels{Pchannels: pchannels(vocab.MaxPChannelsPerCmd)}, ""},
		{"empty", &logpb.AddPChannels{}, "needs at least one pchannel"},
		{"too many", &logpb.AddPChannels{Pchannels: pchannels(vocab.MaxPChannelsPerCmd + 1)}, "max 4096"},
		{"duplicate", &logpb.AddPChannels{Pchannels: []string{pc1, pc1}}, "pchannel " + pc1 + " listed twice"},
	}
	for _, bad := range badPChannelNames {
		tests = append(tests, validateCase{"bad name/" + bad.name, &logpb.AddPChannels{Pchannels: []string{bad.value}}, "pchannel name"})
	}
	runValidateCases(t, tests)
}

func TestValidateAssignPChannels(t *testing.T) {
	a := func(p string, node uint64, mode logpb.AccessMode, term int64) *logpb.PChannelAssignment {
		return &logpb.PChannelAssignment{Pchannel: p, NodeId: node, Mode: mode, ExpectedTerm: term}
	}
	assign := func(as ...*logpb.PChannelAssignment) *logpb.AssignPChannels {
		return &logpb.AssignPChannels{Assignments: as}
	}
	many := func(n int) *logpb.AssignPChannels {
		b := &logpb.AssignPChannels{}
		for _, p := range pchannels(n) {
			b.Assignments = append(b.Assignments, a(p, 1, logpb.AccessMode_ACCESS_RW, 1))
		}
		return b
	}
	rw, ro := logpb.AccessMode_ACCESS_RW, logpb.AccessMode_ACCESS_RO
	tests := []validateCase{
		{"ok", assign(a(pc0, 1, rw, 1), a(pc1, 2, ro, 9)), ""},
		{"max assignments", many(vocab.MaxPChannelsPerCmd), ""},
		{"large term", assign(a(pc0, 1<<63, rw, 1<<62)), ""},
		{"empty", assign(), "AssignPChannels needs 1..4096 assignments, got 0"},
		{"too many", many(vocab.MaxPChannelsPerCmd + 1), "got 4097"},
		{"duplicate pchannel", assign(a(pc0, 1, rw, 1), a(pc0, 2, rw, 1)), "assigned twice in one command"},
		{"node id 0", assign(a(pc0, 0, rw, 1)), "has no node"},
		{"expected term 0", assign(a(pc0, 1, rw, 0)), "expected term must be >= 1"},
		{"negative expected term", assign(a(pc0, 1, rw, -3)), "expected term must be >= 1"},
		{"unknown access mode", assign(a(pc0, 1, logpb.AccessMode(2), 1)), "unknown access mode 2"},
		{"negative access mode", assign(a(pc0, 1, logpb.AccessMode(-1), 1)), "unknown access mode -1"},
		{"second assignment bad", assign(a(pc0, 1, rw, 1), a(pc1, 0, rw, 1)), "assignment of " + pc1 + " has no node"},
	}
	for _, bad := range badPChannelNames {
		tests = append(tests, validateCase{"bad name/" + bad.name, assign(a(pc0, 1, rw, 1), a(bad.value, 1, rw, 1)), "pchannel name"})
	}
	runValidateCases(t, tests)
}

// termListCommands wraps a PChannelTerm list in each command that carries
// one, so the three share one table.
var termListCommands = []struct {
	name string
	wrap func(items ...*logpb.PChannelTerm) *Command
}{
	{"AssignPChannelsDone", func(items ...*logpb.PChannelTerm) *Command {
		c := MustNew(&logpb.AssignPChannelsDone{Channels: items})
		return &c
	}},
	{"MarkPChannelsUnavailable", func(items ...*logpb.PChannelTerm) *Command {
		c := MustNew(&logpb.MarkPChannelsUnavailable{Channels: items})
		return &c
	}},
	{"RecordAssignFailure", func(items ...*logpb.PChannelTerm) *Command {
		if len(items) != 1 {
			return nil // carries exactly one channel; list-length cases do not apply
		}
		c := MustNew(&logpb.RecordAssignFailure{Channel: items[0]})
		return &c
	}},
}

func TestValidatePChannelTermLists(t *testing.T) {
	pt := func(p string, term int64, reason string) *logpb.PChannelTerm {
		return &logpb.PChannelTerm{Pchannel: p, Term: term, Reason: reason}
	}
	many := func(n int) []*logpb.PChannelTerm {
		var out []*logpb.PChannelTerm
		for _, p := range pchannels(n) {
			out = append(out, pt(p, 1, ""))
		}
		return out
	}
	type listCase struct {
		name    string
		items   []*logpb.PChannelTerm
		wantErr string
	}
	cases := []listCase{
		{"ok", []*logpb.PChannelTerm{pt(pc0, 1, "")}, ""},
		{"reason of 1024 bytes", []*logpb.PChannelTerm{pt(pc0, 7, strings.Repeat("r", vocab.MaxReasonBytes))}, ""},
		{"two channels", []*logpb.PChannelTerm{pt(pc0, 1, ""), pt(pc1, 2, "x")}, ""},
		{"max channels", many(vocab.MaxPChannelsPerCmd), ""},
		{"empty", nil, "need 1..4096 channels, got 0"},
		{"too many", many(vocab.MaxPChannelsPerCmd + 1), "got 4097"},
		{"term 0", []*logpb.PChannelTerm{pt(pc0, 0, "")}, "term of " + pc0 + " must be >= 1, got 0"},
		{"negative term", []*logpb.PChannelTerm{pt(pc0, -1, "")}, "got -1"},
		{"reason of 1025 bytes", []*logpb.PChannelTerm{pt(pc0, 1, strings.Repeat("r", vocab.MaxReasonBytes+1))}, "reason is 1025 bytes (max 1024)"},
		{"second bad", []*logpb.PChannelTerm{pt(pc0, 1, ""), pt(pc1, 0, "")}, "term of " + pc1},
	}
	for _, bad := range badPChannelNames {
		cases = append(cases, listCase{"bad name/" + bad.name, []*logpb.PChannelTerm{pt(bad.value, 1, "")}, "pchannel name"})
	}
	for _, w := range termListCommands {
		t.Run(w.name, func(t *testing.T) {
			for _, tc := range cases {
				c := w.wrap(tc.items...)
				if c == nil {
					continue
				}
				t.Run(tc.name, func(t *testing.T) { checkValidateErr(t, *c, tc.wantErr) })
			}
		})
	}
	runValidateCases(t, []validateCase{
		{"RecordAssignFailure/no channel", &logpb.RecordAssignFailure{}, "RecordAssignFailure needs a channel"},
	})
}

// checkValidateErr is runValidateCases' check for one ready-made command.
func checkValidateErr(t *testing.T, c Command, wantErr string) {
	t.Helper()
	err := Validate(c)
	if wantErr == "" {
		if err != nil {
			t.Fatalf("Validate(%v) = %v, want nil", c.Body, err)
		}
		return
	}
	if err == nil || !strings.Contains(err.Error(), wantErr) {
		t.Fatalf("Validate(%v) = %v, want error containing %q", c.Body, err, wantErr)
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate error %v does not wrap ErrInvalid", err)
	}
}

func TestValidateRegisterStreamingNode(t *testing.T) {
	reg := func(edit func(b *logpb.RegisterStreamingNode)) *logpb.RegisterStreamingNode {
		b := &logpb.RegisterStreamingNode{Address: "10.0.0.1:19530", ResourceGroup: "rg", Incarnation: "i-1"}
		edit(b)
		return b
	}
	runValidateCases(t, []validateCase{
		{"ok", reg(func(*logpb.RegisterStreamingNode) {}), ""},
		{"no resource group", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = "" }), ""},
		{"resource group of 64 bytes", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = strings.Repeat("g", 64) }), ""},
		{"incarnation of 128 bytes", reg(func(b *logpb.RegisterStreamingNode) { b.Incarnation = strings.Repeat("i", 128) }), ""},
		{"replace node id", reg(func(b *logpb.RegisterStreamingNode) { b.ReplaceNodeId = 9 }), ""},
		{"ipv6 address", reg(func(b *logpb.RegisterStreamingNode) { b.Address = "[::1]:1" }), ""},
		{"no address", reg(func(b *logpb.RegisterStreamingNode) { b.Address = "" }), "address is required"},
		{"address without port", reg(func(b *logpb.RegisterStreamingNode) { b.Address = "10.0.0.1" }), "address"},
		{"address without host", reg(func(b *logpb.RegisterStreamingNode) { b.Address = ":19530" }), "host is empty"},
		{"port 0", reg(func(b *logpb.RegisterStreamingNode) { b.Address = "h:0" }), "port must be 1..65535"},
		{"port 65536", reg(func(b *logpb.RegisterStreamingNode) { b.Address = "h:65536" }), "port must be 1..65535"},
		{"address of 256 bytes", reg(func(b *logpb.RegisterStreamingNode) { b.Address = strings.Repeat("h", 250) + ":19530" }), "address is 256 bytes (max 255)"},
		{"resource group with a terminal escape", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = "rg\x1b]0;pwned\x07\x1b[2J" }),
			"resource group \"rg\\x1b]0;pwned\\a\\x1b[2J\" contains a control or invisible character (U+001B)"},
		{"resource group with a C1 control", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = "rg\u009b2J" }), "invisible character (U+009B)"},
		{"resource group with a bidi override", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = "\u202erg" }), "invisible character (U+202E)"},
		{"resource group not UTF-8", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = "rg\xff" }), "not valid UTF-8"},
		{"resource group in another script", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = "grupo-é-中" }), ""},
		{"resource group of 65 bytes", reg(func(b *logpb.RegisterStreamingNode) { b.ResourceGroup = strings.Repeat("g", 65) }), "resource group is 65 bytes (max 64)"},
		{"no incarnation", reg(func(b *logpb.RegisterStreamingNode) { b.Incarnation = "" }), "incarnation must be 1..128 bytes"},
		{"incarnation of 129 bytes", reg(func(b *logpb.RegisterStreamingNode) { b.Incarnation = strings.Repeat("i", 129) }), "incarnation must be 1..128 bytes"},
	})
}

func TestValidateMarkStreamingNodeDown(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.MarkStreamingNodeDown{NodeId: 3, Epoch: 17, Reason: "ttl"}, ""},
		{"any epoch", &logpb.MarkStreamingNodeDown{NodeId: 3}, ""},
		{"reason of 1024 bytes", &logpb.MarkStreamingNodeDown{NodeId: 1, Reason: strings.Repeat("r", vocab.MaxReasonBytes)}, ""},
		{"node id 0", &logpb.MarkStreamingNodeDown{Epoch: 1}, "node id must be positive"},
		{"reason of 1025 bytes", &logpb.MarkStreamingNodeDown{NodeId: 1, Reason: strings.Repeat("r", vocab.MaxReasonBytes+1)}, "reason is 1025 bytes (max 1024)"},
	})
}

func TestValidateSetStreamingNodeDrain(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"drain", &logpb.SetStreamingNodeDrain{NodeId: 3, Draining: true, Reason: "upgrade"}, ""},
		{"undrain", &logpb.SetStreamingNodeDrain{NodeId: 3}, ""},
		{"reason of 1024 bytes", &logpb.SetStreamingNodeDrain{NodeId: 1, Reason: strings.Repeat("r", vocab.MaxReasonBytes)}, ""},
		{"node id 0", &logpb.SetStreamingNodeDrain{Draining: true}, "node id must be positive"},
		{"reason of 1025 bytes", &logpb.SetStreamingNodeDrain{NodeId: 1, Reason: strings.Repeat("r", vocab.MaxReasonBytes+1)}, "reason is 1025 bytes (max 1024)"},
	})
}

func TestValidateAllocVirtualChannels(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.AllocVirtualChannels{CollectionId: 449326211, Count: 2}, ""},
		{"count 1", &logpb.AllocVirtualChannels{CollectionId: 1, Count: 1}, ""},
		{"max count", &logpb.AllocVirtualChannels{CollectionId: 1<<63 - 1, Count: vocab.MaxVChannelsPerColl}, ""},
		{"collection id 0", &logpb.AllocVirtualChannels{Count: 1}, "collection id must be positive, got 0"},
		{"negative collection id", &logpb.AllocVirtualChannels{CollectionId: -5, Count: 1}, "got -5"},
		{"count 0", &logpb.AllocVirtualChannels{CollectionId: 1}, "vchannel count must be in 1..1024, got 0"},
		{"count over max", &logpb.AllocVirtualChannels{CollectionId: 1, Count: vocab.MaxVChannelsPerColl + 1}, "got 1025"},
	})
}

func TestValidateDropVirtualChannels(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.DropVirtualChannels{CollectionId: 449326211}, ""},
		{"collection id 0", &logpb.DropVirtualChannels{}, "collection id must be positive, got 0"},
		{"negative collection id", &logpb.DropVirtualChannels{CollectionId: -1}, "got -1"},
	})
}

func TestValidateUpdateReplicateConfiguration(t *testing.T) {
	cl := func(id string, ps ...string) *logpb.ReplicateCluster {
		return &logpb.ReplicateCluster{ClusterId: id, Pchannels: ps}
	}
	edge := func(src, dst string) *logpb.ReplicateTopology {
		return &logpb.ReplicateTopology{SourceClusterId: src, TargetClusterId: dst}
	}
	cfg := func(clusters []*logpb.ReplicateCluster, topo ...*logpb.ReplicateTopology) *logpb.UpdateReplicateConfiguration {
		return &logpb.UpdateReplicateConfiguration{Config: &logpb.ReplicateConfiguration{Clusters: clusters, Topology: topo}}
	}
	a := cl("a", "a-dml_0", "a-dml_1")
	b := cl("b", "b-dml_0", "b-dml_1")
	c := cl("c", "c-dml_0", "c-dml_1")
	manyClusters := func(n int) []*logpb.ReplicateCluster {
		out := make([]*logpb.ReplicateCluster, n)
		for i := range out {
			out[i] = cl(fmt.Sprintf("c%d", i), "p_0")
		}
		return out
	}
	tests := []validateCase{
		{"one cluster", cfg([]*logpb.ReplicateCluster{a}), ""},
		{"primary and secondary", cfg([]*logpb.ReplicateCluster{a, b}, edge("a", "b")), ""},
		{"chain", cfg([]*logpb.ReplicateCluster{a, b, c}, edge("a", "b"), edge("b", "c")), ""},
		{"star", cfg([]*logpb.ReplicateCluster{a, b, c}, edge("a", "b"), edge("a", "c")), ""},
		{"no topology", cfg([]*logpb.ReplicateCluster{a, b}), ""},
		{"max clusters", cfg(manyClusters(MaxReplicateCluster)), ""},
		{"missing config", &logpb.UpdateReplicateConfiguration{}, "replicate configuration is missing"},
		{"no clusters", cfg(nil), "needs 1..64 clusters, got 0"},
		{"too many clusters", cfg(manyClusters(MaxReplicateCluster + 1)), "got 65"},
		{"duplicate cluster id", cfg([]*logpb.ReplicateCluster{a, cl("a", "x_0", "x_1")}), "cluster a listed twice"},
		{"empty cluster id", cfg([]*logpb.ReplicateCluster{cl("", "p_0")}), "cluster id must be 1..64 bytes, got 0"},
		{"bad cluster id", cfg([]*logpb.ReplicateCluster{cl("a/b", "p_0")}), `character '/' not allowed`},
		{"long cluster id", cfg([]*logpb.ReplicateCluster{cl(strings.Repeat("c", 65), "p_0")}), "got 65"},
		{"cluster with no pchannels", cfg([]*logpb.ReplicateCluster{a, cl("b")}), "cluster b lists no pchannels"},
		{"bad pchannel", cfg([]*logpb.ReplicateCluster{cl("a", "p_01")}), "cluster a: "},
		{"duplicate pchannel", cfg([]*logpb.ReplicateCluster{cl("a", "p_0", "p_0")}), "listed twice"},
		{"unequal pchannel counts", cfg([]*logpb.ReplicateCluster{a, cl("b", "b-dml_0")}), "same number of pchannels (b lists 1, others 2)"},
		{"unequal pchannel counts, later cluster", cfg([]*logpb.ReplicateCluster{a, b, cl("c", "c_0", "c_1", "c_2")}), "c lists 3"},
		{"unknown source", cfg([]*logpb.ReplicateCluster{a, b}, edge("x", "b")), "topology edge x->b names an unlisted cluster"},
		{"unknown target", cfg([]*logpb.ReplicateCluster{a, b}, edge("a", "x")), "names an unlisted cluster"},
		{"self loop", cfg([]*logpb.ReplicateCluster{a, b}, edge("a", "a")), "topology edge a->a is a self loop"},
		{"two sources for one target", cfg([]*logpb.ReplicateCluster{a, b, c}, edge("a", "c"), edge("b", "c")), "cluster c has more than one source"},
		{"same edge twice", cfg([]*logpb.ReplicateCluster{a, b}, edge("a", "b"), edge("a", "b")), "more than one source"},
	}
	runValidateCases(t, tests)
	// The exported helper agrees with Validate.
	for _, tt := range tests {
		body := tt.body.(*logpb.UpdateReplicateConfiguration)
		if err := ValidateReplicateConfiguration(body.Config); (err == nil) != (tt.wantErr == "") {
			t.Errorf("%s: ValidateReplicateConfiguration = %v", tt.name, err)
		}
	}
}

func TestValidateResetReplicateRole(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"reason", &logpb.ResetReplicateRole{Reason: "primary site lost"}, ""},
		{"reason of 1024 bytes", &logpb.ResetReplicateRole{Reason: strings.Repeat("r", vocab.MaxReasonBytes)}, ""},
		{"no reason", &logpb.ResetReplicateRole{}, "needs a reason"},
		{"blank reason", &logpb.ResetReplicateRole{Reason: " \t\n"}, "needs a reason"},
		{"reason of 1025 bytes", &logpb.ResetReplicateRole{Reason: strings.Repeat("r", vocab.MaxReasonBytes+1)}, "reason is 1025 bytes (max 1024)"},
	})
}

func TestTruncateReason(t *testing.T) {
	euro := "€" // 3 bytes
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "deadline exceeded", "deadline exceeded"},
		{"exactly the limit", strings.Repeat("r", vocab.MaxReasonBytes), strings.Repeat("r", vocab.MaxReasonBytes)},
		{"one over", strings.Repeat("r", vocab.MaxReasonBytes+1), strings.Repeat("r", vocab.MaxReasonBytes)},
		{"rune across the limit", strings.Repeat("r", vocab.MaxReasonBytes-1) + euro, strings.Repeat("r", vocab.MaxReasonBytes-1)},
		{"rune ending at the limit", strings.Repeat("r", vocab.MaxReasonBytes-3) + euro + "x", strings.Repeat("r", vocab.MaxReasonBytes-3) + euro},
		{"invalid UTF-8 replaced", "bad\xffbyte", "bad\uFFFDbyte"},
	}
	for _, tt := range tests {
		if got := vocab.TruncateReason(tt.in); got != tt.want {
			t.Errorf("%s: vocab.TruncateReason = %q (%d bytes), want %q (%d bytes)", tt.name, got, len(got), tt.want, len(tt.want))
		}
	}
}

// FuzzTruncateReason: the result is always a reason every channel command
// accepts and that encodes (valid UTF-8), and it is a prefix of the
// sanitised input.
func FuzzTruncateReason(f *testing.F) {
	f.Add("")
	f.Add(strings.Repeat("€", 400))
	f.Add(strings.Repeat("\xff", 2000))
	f.Fuzz(func(t *testing.T, s string) {
		r := vocab.TruncateReason(s)
		if len(r) > vocab.MaxReasonBytes || !utf8.ValidString(r) {
			t.Fatalf("vocab.TruncateReason gave %d bytes, valid UTF-8 %v", len(r), utf8.ValidString(r))
		}
		if !strings.HasPrefix(strings.ToValidUTF8(s, "\uFFFD"), r) {
			t.Fatal("result is not a prefix of the sanitised input")
		}
		if vocab.TruncateReason(r) != r {
			t.Fatal("vocab.TruncateReason is not idempotent")
		}
		c := MustNew(&logpb.MarkStreamingNodeDown{NodeId: 1, Reason: r})
		if err := Validate(c); err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if _, err := EncodeEntry([]Command{c}); err != nil {
			t.Fatalf("EncodeEntry: %v", err)
		}
	})
}
