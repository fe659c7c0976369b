package broadcaster

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/vocab"
)

// TestBroadcastRequestCarriesItsRequestID: the request ID of a Broadcast
// reaches the broadcaster (which names the CreateBroadcast with it, so a
// resend creates no second task); one over the size limit is refused
// before anything is forwarded.
func TestBroadcastRequestCarriesItsRequestID(t *testing.T) {
	req := &coordpb.BroadcastRequest{MessageType: "CreateIndex", Payload: []byte("idx"), RequestId: "call-1"}
	br, err := NewRequest(req)
	if err != nil || br.req.RequestID != "call-1" {
		t.Fatalf("NewRequest = %+v, %v; want request ID call-1", br, err)
	}
	req.RequestId = strings.Repeat("x", vocab.MaxRequestIDBytes+1)
	if _, err := NewRequest(req); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("an oversized request ID: %v; want ErrInvalid", err)
	}
}
