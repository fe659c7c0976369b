package commands

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

type validateCase struct {
	name    string
	body    proto.Message
	wantErr string // "" means valid; otherwise a substring of the error
}

func runValidateCases(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(MustNew(tt.body))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%v) = %v, want nil", tt.body, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%v) = nil, want error containing %q", tt.body, tt.wantErr)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate error %v does not wrap ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

var (
	id64 = strings.Repeat("a", vocab.MaxMemberIDBytes)
	id65 = strings.Repeat("a", vocab.MaxMemberIDBytes+1)
)

func TestValidateLeaderEstablished(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.LeaderEstablished{Term: 1, LeaderId: "node-1"}, ""},
		{"large term", &logpb.LeaderEstablished{Term: 1 << 63, LeaderId: "n"}, ""},
		{"term 0", &logpb.LeaderEstablished{Term: 0, LeaderId: "node-1"}, "leader term must be positive"},
		{"empty leader", &logpb.LeaderEstablished{Term: 1}, "member id must be 1..64 bytes, got 0"},
		{"bad leader id", &logpb.LeaderEstablished{Term: 1, LeaderId: "node/1"}, `character '/' not allowed`},
	})
}

func TestValidateUpsertMember(t *testing.T) {
	member := func(edit func(m *logpb.Member)) *logpb.UpsertMember {
		m := &logpb.Member{Id: "node-1", RaftAddr: "127.0.0.1:7001", GrpcAddr: "127.0.0.1:7101", HttpAddr: "localhost:8080"}
		edit(m)
		return &logpb.UpsertMember{Member: m}
	}
	runValidateCases(t, []validateCase{
		{"ok", member(func(*logpb.Member) {}), ""},
		{"only raft addr", member(func(m *logpb.Member) { m.GrpcAddr, m.HttpAddr = "", "" }), ""},
		{"ipv6", member(func(m *logpb.Member) { m.RaftAddr = "[::1]:7001" }), ""},
		{"id with all allowed chars", member(func(m *logpb.Member) { m.Id = "aZ09._-" }), ""},
		{"id of 64 bytes", member(func(m *logpb.Member) { m.Id = id64 }), ""},
		{"port 1", member(func(m *logpb.Member) { m.RaftAddr = "h:1" }), ""},
		{"port 65535", member(func(m *logpb.Member) { m.RaftAddr = "h:65535" }), ""},
		{"address of 255 bytes", member(func(m *logpb.Member) { m.HttpAddr = strings.Repeat("h", 250) + ":8080" }), ""},
		{"missing member", &logpb.UpsertMember{}, "member is missing"},
		{"empty id", member(func(m *logpb.Member) { m.Id = "" }), "member id must be 1..64 bytes, got 0"},
		{"id of 65 bytes", member(func(m *logpb.Member) { m.Id = id65 }), "got 65"},
		{"id with space", member(func(m *logpb.Member) { m.Id = "node 1" }), `character ' ' not allowed`},
		{"id with colon", member(func(m *logpb.Member) { m.Id = "node:1" }), `character ':' not allowed`},
		{"id with non-ASCII", member(func(m *logpb.Member) { m.Id = "nöde" }), "not allowed"},
		{"missing raft addr", member(func(m *logpb.Member) { m.RaftAddr = "" }), "raft_addr is required"},
		{"raft addr without port", member(func(m *logpb.Member) { m.RaftAddr = "127.0.0.1" }), "raft_addr"},
		{"raft addr without host", member(func(m *logpb.Member) { m.RaftAddr = ":7001" }), "host is empty"},
		{"port 0", member(func(m *logpb.Member) { m.RaftAddr = "h:0" }), "port must be 1..65535"},
		{"port 65536", member(func(m *logpb.Member) { m.GrpcAddr = "h:65536" }), "grpc_addr"},
		{"named port", member(func(m *logpb.Member) { m.GrpcAddr = "h:http" }), "port must be 1..65535"},
		{"negative port", member(func(m *logpb.Member) { m.HttpAddr = "h:-1" }), "http_addr"},
		{"address of 256 bytes", member(func(m *logpb.Member) { m.HttpAddr = strings.Repeat("h", 251) + ":8080" }), "http_addr is 256 bytes (max 255)"},
		{"too many colons", member(func(m *logpb.Member) { m.HttpAddr = "::1:80" }), "http_addr"},
	})
}

func TestValidateRemoveMember(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.RemoveMember{Id: "node-3"}, ""},
		{"id of 64 bytes", &logpb.RemoveMember{Id: id64}, ""},
		{"empty id", &logpb.RemoveMember{}, "member id must be 1..64 bytes, got 0"},
		{"id of 65 bytes", &logpb.RemoveMember{Id: id65}, "got 65"},
		{"id with slash", &logpb.RemoveMember{Id: "../etc"}, `character '/' not allowed`},
	})
}

func TestValidateExtendTSOWindow(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"ok", &logpb.ExtendTSOWindow{LimitPhysicalMs: 1700000000000}, ""},
		{"one", &logpb.ExtendTSOWindow{LimitPhysicalMs: 1}, ""},
		{"largest 46-bit", &logpb.ExtendTSOWindow{LimitPhysicalMs: 1<<46 - 1}, ""},
		{"zero", &logpb.ExtendTSOWindow{}, "tso window limit must be positive, got 0"},
		{"negative", &logpb.ExtendTSOWindow{LimitPhysicalMs: -5}, "got -5"},
		{"2^46", &logpb.ExtendTSOWindow{LimitPhysicalMs: 1 << 46}, "overflows the 46-bit physical part"},
	})
}

func TestValidateReserveIDs(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"one", &logpb.ReserveIDs{Count: 1}, ""},
		{"max", &logpb.ReserveIDs{Count: MaxReserveIDs}, ""},
		{"zero", &logpb.ReserveIDs{}, "id reservation count must be in 1..16777216, got 0"},
		{"over max", &logpb.ReserveIDs{Count: MaxReserveIDs + 1}, "got 16777217"},
		{"huge", &logpb.ReserveIDs{Count: 1<<64 - 1}, "got 18446744073709551615"},
	})
}

func TestValidateWithoutBody(t *testing.T) {
	tests := []struct {
		name    string
		cmd     Command
		wantErr string
	}{
		{"skipped ignorable command", Command{Type: Ignorable | 0x0777}, ""},
		{"unregistered body", Command{Type: 0x0777, Body: &logpb.Member{Id: "x"}}, "no validator for Type(0x0777)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.cmd)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate = %v, want ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestValidateCoversRegistry: every registered type has a validator (the
// fixed sample passes, and a zero-valued body does not hit "no validator").
func TestValidateCoversRegistry(t *testing.T) {
	for _, typ := range registeredTypes() {
		err := Validate(Command{Type: typ, Version: 1, Body: registry[typ].newBody()})
		if err != nil && strings.Contains(err.Error(), "no validator") {
			t.Errorf("%s has no validator: %v", typ, err)
		}
	}
}
