package fsm

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// undecodable is a payload no protobuf message decodes (a varint that
// never ends).
var undecodable = []byte{0xff}

// TestUndecodablePayloadIsRefusedAtCreation: admission decodes the payload
// of every message type that has a callback, so no task Apply creates can
// reach its callback with an undecodable payload.
func TestUndecodablePayloadIsRefusedAtCreation(t *testing.T) {
	s, _ := mustApply(t, New(), base()...)
	for msgType := range broadcastCallbacks {
		if msgType == vocab.MsgFlushAll {
			continue // its callback reads no payload
		}
		t.Run(msgType, func(t *testing.T) {
			if checkBuiltinPayload(msgType, undecodable) == "" {
				t.Fatal("checkBuiltinPayload accepts an undecodable payload")
			}
			_, res := mustApply(t, s, createB(msgType, withPayload(undecodable)))
			if r := res[0].Rejection; r == nil || r.Code != logpb.RejectCode_REJECT_INVALID {
				t.Fatalf("CreateBroadcast of an undecodable %s payload: %v, want REJECT_INVALID", msgType, res[0])
			}
		})
	}
}

// TestUndecodablePayloadFailsTheCallback: a task whose payload does not
// decode (only a damaged snapshot holds one) fails its callback with a
// fixed message, stays pending with the failure recorded, and changes
// nothing else.
func TestUndecodablePayloadFailsTheCallback(t *testing.T) {
	s, _ := mustApply(t, New(), base(
		createB(vocab.MsgDropCollection, withPayload(dropCollPayload(t, 5))),
		ackAll(1, cch),
	)...)
	damaged := proto.Clone(mustTask(t, s, 1)).(*logpb.BroadcastTask)
	damaged.Payload = undecodable
	d := *s
	d.bc.put(damaged)

	const msg = "broadcast 1: the DropCollection payload does not decode"
	after, res := mustApply(t, &d, completeB(1, withProposedAt(5000)))
	if !proto.Equal(res[0], completionResult(false, msg)) {
		t.Fatalf("CompleteBroadcast: %v, want callback error %q", res[0], msg)
	}
	want := proto.Clone(damaged).(*logpb.BroadcastTask)
	want.CallbackAttempts, want.LastError, want.LastErrorMs = 1, msg, 5000
	sameExceptTask(t, &d, after, want)

	// Every callback that reads a payload refuses the same way.
	for msgType, cb := range broadcastCallbacks {
		if msgType == vocab.MsgFlushAll {
			continue
		}
		task := &logpb.BroadcastTask{Id: 7, MessageType: msgType, Payload: undecodable}
		scratch := *s
		r := cb(&scratch, task, 5000)
		if r == nil || r.Rejection == nil || r.Rejection.Code != logpb.RejectCode_REJECT_INVALID {
			t.Fatalf("%s callback on an undecodable payload: %v, want REJECT_INVALID", msgType, r)
		}
		if want := "broadcast 7: the " + msgType + " payload does not decode"; r.Rejection.Message != want {
			t.Fatalf("%s callback: %q, want %q", msgType, r.Rejection.Message, want)
		}
	}
}
