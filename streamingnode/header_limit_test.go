package streamingnode

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/vocab"
)

// TestOversizeHeadersAreRefused: the node's port reads at most
// vocab.MaxGRPCHeaderListBytes of metadata per call (probe D16 on
// coordd's port; the same bound here). Status, which anyone may call,
// answers with half the limit and is refused by the transport with twice
// it.
func TestOversizeHeadersAreRefused(t *testing.T) {
	f := startFakeCoord(t)
	n := startNode(t, f, t.TempDir(), nil)
	call := func(padBytes int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("a", padBytes))
		_, err := n.cl.Status(ctx, &coordpb.NodeStatusRequest{})
		return err
	}
	if err := call(vocab.MaxGRPCHeaderListBytes / 2); err != nil {
		t.Fatalf("Status with %d bytes of metadata: %v", vocab.MaxGRPCHeaderListBytes/2, err)
	}
	if err := call(2 * vocab.MaxGRPCHeaderListBytes); err == nil {
		t.Fatalf("Status with %d bytes of metadata was answered", 2*vocab.MaxGRPCHeaderListBytes)
	} else if c := status.Code(err); c == codes.OK || c == codes.DeadlineExceeded {
		t.Fatalf("Status with %d bytes of metadata: %v, want a transport refusal", 2*vocab.MaxGRPCHeaderListBytes, err)
	}
}
