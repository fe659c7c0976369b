package commands

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// A checked broadcast request completed by Command is the command New
// builds from the same body, or refused by both: the split check (the
// request once, then only what the leader adds) accepts exactly what the
// whole check accepts, and Apply's Validate passes on what it builds.
func TestBroadcastRequestCommandAgreesWithNew(t *testing.T) {
	req := &logpb.CreateBroadcast{MessageType: "CreateIndex", Payload: []byte("idx"),
		ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_COLLECTION_NAME, Key: "db:c"}}, IdempotencyKey: "", AckSyncUp: true}
	r, err := CheckBroadcastRequest(req, "call-1")
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, vocab.MaxBroadcastTargets+1)
	for i := range many {
		many[i] = vocab.PChannelName("by-dev-rootcoord-dml", i)
	}
	manyIDs := make([]uint64, MaxBroadcastPredecessors+1)
	for i := range manyIDs {
		manyIDs[i] = uint64(i + 1)
	}
	for name, tc := range map[string]struct {
		targets   []string
		after     []uint64
		requestID string
	}{
		"plain":                 {[]string{bcCChannel, bcVChannel}, nil, "call-1"},
		"ordered":               {[]string{bcCChannel}, []uint64{4, 7}, "call-1"},
		"leader's request ID":   {[]string{bcCChannel}, nil, "broadcast-create-1"},
		"no targets":            {nil, nil, "call-1"},
		"a target twice":        {[]string{bcCChannel, bcCChannel}, nil, "call-1"},
		"a bad target":          {[]string{"no such channel!"}, nil, "call-1"},
		"too many targets":      {many, nil, "call-1"},
		"a zero predecessor":    {[]string{bcCChannel}, []uint64{0}, "call-1"},
		"too many before":       {[]string{bcCChannel}, manyIDs, "call-1"},
		"a too long request ID": {[]string{bcCChannel}, nil, strings.Repeat("x", vocab.MaxRequestIDBytes+1)},
	} {
		got, gotErr := r.Command(tc.targets, tc.after, tc.requestID)
		body := proto.Clone(req).(*logpb.CreateBroadcast)
		body.Vchannels, body.AfterBroadcasts = tc.targets, tc.after
		want, wantErr := New(body, tc.requestID)
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: Command %v, New %v; want both to accept or both to refuse", name, gotErr, wantErr)
			continue
		}
		if gotErr != nil {
			if !errors.Is(gotErr, ErrInvalid) {
				t.Errorf("%s: %v; want ErrInvalid", name, gotErr)
			}
			continue
		}
		if !got.Checked() || got.RequestID != want.RequestID || got.Type != want.Type || !proto.Equal(got.Body, want.Body) {
			t.Errorf("%s: Command built %+v; New built %+v", name, got, want)
		}
		if err := Validate(got); err != nil {
			t.Errorf("%s: Validate: %v", name, err)
		}
	}
}

// A request CheckBroadcastRequest refuses is refused with ErrInvalid, and
// the zero value completes into no command.
func TestCheckBroadcastRequestRefuses(t *testing.T) {
	for name, b := range map[string]*logpb.CreateBroadcast{
		"bad type":    {MessageType: "no such type!"},
		"bad key":     {MessageType: "CreateIndex", ResourceKeys: []*logpb.ResourceKey{{Domain: logpb.ResourceDomain_RK_DB_NAME}}},
		"bad payload": {MessageType: vocab.MsgCreateCollection, Payload: []byte{0xff}},
	} {
		if _, err := CheckBroadcastRequest(b, ""); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
	if _, err := CheckBroadcastRequest(&logpb.CreateBroadcast{MessageType: "CreateIndex"}, strings.Repeat("x", vocab.MaxRequestIDBytes+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("a too long request ID: %v; want ErrInvalid", err)
	}
	if _, err := (BroadcastRequest{}).Command([]string{bcCChannel}, nil, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("the zero request: %v; want ErrInvalid", err)
	}
}
