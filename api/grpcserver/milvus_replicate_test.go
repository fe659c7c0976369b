package grpcserver

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/milvuspb"
	"github.com/coordd/coordd/commands/logpb"
)

// TestMilvusReplicateConfiguration: Milvus's UpdateReplicateConfiguration
// installs the clusters and topology with coordd's semantics, without the
// connection parameters; a configuration coordd refuses is
// INVAILD_ARGUMENT and changes nothing; a secondary refuses with a
// FailedPrecondition StreamingError.
func TestMilvusReplicateConfiguration(t *testing.T) {
	tn := startTestNodeWith(t) // no broadcaster: the configuration is committed directly
	mustCommit(t, tn, &logpb.InitStreaming{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1, bcP2}})
	mc := milvuspb.NewStreamingCoordAssignmentServiceClient(tn.conn)
	cfg := &milvuspb.ReplicateConfiguration{Clusters: []*milvuspb.MilvusCluster{{ClusterId: bcCluster,
		ConnectionParam: &milvuspb.ConnectionParam{Uri: "http://127.0.0.1:19530", Token: "root:Milvus"}, Pchannels: []string{bcP0, bcP1}}}}
	if _, err := mc.UpdateReplicateConfiguration(callCtx(t), &milvuspb.UpdateReplicateConfigurationRequest{Configuration: cfg}); err != nil {
		t.Fatal(err)
	}
	want := &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: bcCluster, Pchannels: []string{bcP0, bcP1}}}}
	if got := tn.node.State().ReplicateConfiguration(); !proto.Equal(got, want) {
		t.Fatalf("installed %v, want %v", got, want)
	}
	if got := milvusFullAssignment(tn.node.State()).ReplicateConfiguration; len(got.GetClusters()) != 1 || got.Clusters[0].ConnectionParam != nil {
		t.Fatalf("AssignmentDiscover shows %v", got)
	}
	before := tn.node.State().AppliedIndex()
	bad := &milvuspb.ReplicateConfiguration{Clusters: []*milvuspb.MilvusCluster{{Pchannels: []string{bcP0}}}}
	_, err := mc.UpdateReplicateConfiguration(callCtx(t), &milvuspb.UpdateReplicateConfigurationRequest{Configuration: bad})
	if g, code := streamingCode(t, err); g != codes.InvalidArgument || code != milvuspb.StreamingCode_STREAMING_CODE_INVAILD_ARGUMENT {
		t.Fatalf("a cluster without an ID: %v", err)
	}
	if after := tn.node.State().AppliedIndex(); after != before {
		t.Fatalf("a refused configuration moved the applied index from %d to %d", before, after)
	}
	mustCommit(t, tn, &logpb.UpdateReplicateConfiguration{Config: secondaryConfig()})
	_, err = mc.UpdateReplicateConfiguration(callCtx(t), &milvuspb.UpdateReplicateConfigurationRequest{Configuration: cfg})
	if g, code := streamingCode(t, err); g != codes.FailedPrecondition {
		t.Fatalf("update on a secondary: %v %v (%v)", g, code, err)
	} else {
		t.Logf("update on a secondary: %v", code)
	}
}
