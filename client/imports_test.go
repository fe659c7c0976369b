package client_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/client/clienttest"
)

// The import calls refuse a request without its identifying fields before
// any round trip.
func TestImportCallsCheckLocally(t *testing.T) {
	fc := clienttest.Start(t, 1)
	c := newClient(t, client.Config{Endpoints: fc.Endpoints()})
	ctx := context.Background()
	if _, err := c.CreateImportSegment(ctx, &coordpb.CreateImportSegmentRequest{CollectionId: 100}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("CreateImportSegment without a node: %v", err)
	}
	if _, err := c.FinishImportSegment(ctx, &coordpb.FinishImportSegmentRequest{SegmentId: 5}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("FinishImportSegment without a pointer: %v", err)
	}
	if _, err := c.FinishImportSegment(ctx, &coordpb.FinishImportSegmentRequest{ManifestPath: `{"ver":1,"base_path":"a"}`}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("FinishImportSegment without a segment: %v", err)
	}
}
