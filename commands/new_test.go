package commands

import (
	"context"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

func TestNewValidatesOnce(t *testing.T) {
	big := &logpb.UpsertMember{Member: &logpb.Member{Id: "m", RaftAddr: "127.0.0.1:1", GrpcAddr: strings.Repeat("h", MaxCommandBytes)}}
	tests := []struct {
		name      string
		body      proto.Message
		requestID string
		wantErr   error
		wantMsg   string
	}{
		{"valid", &logpb.ReserveIDs{Count: 1}, "r-1", nil, ""},
		{"request ID at limit", &logpb.ReserveIDs{Count: 1}, strings.Repeat("r", vocab.MaxRequestIDBytes), nil, ""},
		{"request ID over limit", &logpb.ReserveIDs{Count: 1}, strings.Repeat("r", vocab.MaxRequestIDBytes+1), ErrInvalid, "request_id is 129 bytes (max 128)"},
		{"bad shape", &logpb.ReserveIDs{Count: 0}, "", ErrInvalid, "id reservation count"},
		{"unregistered body", &logpb.Member{Id: "x"}, "", ErrUnknownType, ""},
		{"body over size limit", big, "", ErrInvalid, ""}, // the 255-byte address limit fires first
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := New(tt.body, tt.requestID)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				if !c.Checked() || c.RequestID != tt.requestID || c.Type == 0 || c.Version == 0 {
					t.Fatalf("New = %+v: want a checked command with the request ID, type and version", c)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("New error = %v, want %v containing %q", err, tt.wantErr, tt.wantMsg)
			}
			if c.Checked() {
				t.Fatal("a refused command is marked checked")
			}
		})
	}
}

func TestNewRefusesBodyOverSizeLimit(t *testing.T) {
	// A shape-valid body over MaxCommandBytes: the largest payload and many
	// long target names.
	prefix := strings.Repeat("p", 120)
	body := &logpb.CreateBroadcast{MessageType: "CreateIndex", Payload: make([]byte, vocab.MaxBroadcastPayload)}
	for i := 0; proto.Size(body) <= MaxCommandBytes; i++ {
		body.Vchannels = append(body.Vchannels, vocab.VChannelName(vocab.PChannelName(prefix, i), 1<<40, 0))
	}
	if err := Validate(MustNew(body)); err != nil {
		t.Fatalf("the oversized body is not shape-valid, so the test proves nothing: %v", err)
	}
	if _, err := New(body, ""); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("New of a %d-byte body = %v, want ErrTooLarge", proto.Size(body), err)
	}
}

func TestMustNewIsUncheckedAndDecidedInKeepsCheck(t *testing.T) {
	if MustNew(&logpb.ReserveIDs{Count: 1}).Checked() {
		t.Fatal("MustNew marked its command checked; only New may")
	}
	c, err := New(&logpb.ReserveIDs{Count: 1}, "")
	if err != nil {
		t.Fatal(err)
	}
	d := c.DecidedIn(7)
	if !d.Checked() || d.LeaderTerm != 7 || c.LeaderTerm != 0 {
		t.Fatalf("DecidedIn(7) = term %d checked %v (original term %d); want a checked copy at term 7", d.LeaderTerm, d.Checked(), c.LeaderTerm)
	}
}

type recordingProposer struct{ got []Command }

func (p *recordingProposer) Propose(_ context.Context, c Command, _ ...Option) (*logpb.Result, error) {
	p.got = append(p.got, c)
	return &logpb.Result{}, nil
}

func TestProposeBuildsWithNew(t *testing.T) {
	p := &recordingProposer{}
	if _, err := Propose(context.Background(), p, &logpb.ReserveIDs{Count: 0}, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Propose(invalid) = %v, want ErrInvalid", err)
	}
	if len(p.got) != 0 {
		t.Fatalf("an invalid body reached the proposer: %v", p.got)
	}
	if _, err := Propose(context.Background(), p, &logpb.ReserveIDs{Count: 2}, "r"); err != nil {
		t.Fatal(err)
	}
	if len(p.got) != 1 || !p.got[0].Checked() || p.got[0].RequestID != "r" {
		t.Fatalf("proposer got %+v, want one checked command with request ID r", p.got)
	}
}
