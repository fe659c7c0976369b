package httpgateway

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/coordd/coordd/api/coordpb"
)

func TestMarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		msg  proto.Message
		want string
	}{
		{
			// string, uint64, bool, repeated message: every field present.
			name: "status with every field set",
			msg: &coordpb.StatusResponse{
				NodeId: "n1", State: "Leader", LeaderId: "n1", LeaderGrpcAddr: "127.0.0.1:7001",
				Term: math.MaxUint64, CommitIndex: 1 << 53, AppliedIndex: 1<<53 + 1, LastLogIndex: 9,
				EstablishedTerm: 3, LastSnapshotIndex: 1,
				Members: []*coordpb.Member{
					{Id: "n1", RaftAddr: "127.0.0.1:7101", GrpcAddr: "127.0.0.1:7001", HttpAddr: "127.0.0.1:8001", Suffrage: "voter", Leader: true},
					{Id: "n2", RaftAddr: "127.0.0.1:7102", Suffrage: "nonvoter"},
				},
			},
			want: `{"node_id":"n1","state":"Leader","leader_id":"n1","leader_grpc_addr":"127.0.0.1:7001",` +
				`"term":18446744073709551615,"commit_index":9007199254740992,"applied_index":9007199254740993,` +
				`"last_log_index":9,"established_term":3,"members":[` +
				`{"id":"n1","raft_addr":"127.0.0.1:7101","grpc_addr":"127.0.0.1:7001","http_addr":"127.0.0.1:8001","suffrage":"voter","leader":true},` +
				`{"id":"n2","raft_addr":"127.0.0.1:7102","grpc_addr":"","http_addr":"","suffrage":"nonvoter","leader":false}],` +
				`"last_snapshot_index":1}`,
		},
		{
			name: "zero values are present",
			msg:  &coordpb.StatusResponse{},
			want: `{"node_id":"","state":"","leader_id":"","leader_grpc_addr":"","term":0,"commit_index":0,"applied_index":0,` +
				`"last_log_index":0,"established_term":0,"members":[],"last_snapshot_index":0}`,
		},
		{name: "empty message", msg: &coordpb.StatusRequest{}, want: `{}`},
		{name: "uint64 and uint32", msg: &coordpb.AllocIDResponse{First: 1<<63 + 1, Count: math.MaxUint32},
			want: `{"first":9223372036854775809,"count":4294967295}`},
		{name: "enum by name", msg: &coordpb.MembersRequest{Consistency: coordpb.ReadConsistency_STALE}, want: `{"consistency":"STALE"}`},
		{name: "enum zero", msg: &coordpb.MembersRequest{}, want: `{"consistency":"LINEARIZABLE"}`},
		{name: "enum unknown to this binary", msg: &coordpb.MembersRequest{Consistency: 7}, want: `{"consistency":7}`},
		{name: "bytes as base64", msg: &coordpb.SnapshotChunk{Data: []byte{0, 1, 2, 0xff}}, want: `{"data":"AAEC/w=="}`},
		{name: "empty bytes", msg: &coordpb.SnapshotChunk{}, want: `{"data":""}`},
		{name: "string escaping", msg: &coordpb.RemoveMemberRequest{Id: "q\"b\\s\n<é>\x01"}, want: `{"id":"q\"b\\s\n\u003cé\u003e\u0001"}`},
		// Kinds coordpb does not use yet, through the well-known wrappers.
		{name: "int64", msg: wrapperspb.Int64(math.MinInt64), want: `{"value":-9223372036854775808}`},
		{name: "int32", msg: wrapperspb.Int32(-5), want: `{"value":-5}`},
		{name: "double", msg: wrapperspb.Double(1.5), want: `{"value":1.5}`},
		{name: "float", msg: wrapperspb.Float(0.25), want: `{"value":0.25}`},
		{name: "bool wrapper", msg: wrapperspb.Bool(true), want: `{"value":true}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := marshalJSON(tc.msg)
			if string(got) != tc.want {
				t.Errorf("marshalJSON =\n%s\nwant\n%s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("not valid JSON: %s", got)
			}
			// Whatever the gateway writes for an API message, the gateway
			// (protojson) reads back to the same message. (The wrappers
			// have a special protojson form, so they are not compared.)
			if tc.msg.ProtoReflect().Descriptor().ParentFile().Package() != "coordd.v1" {
				return
			}
			back := tc.msg.ProtoReflect().New().Interface()
			if err := protojson.Unmarshal(got, back); err != nil {
				t.Fatalf("protojson cannot read it back: %v", err)
			}
			if !proto.Equal(back, tc.msg) {
				t.Errorf("round trip: got %v; want %v", back, tc.msg)
			}
		})
	}

	// Numbers decode exactly, including those above 2^53.
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(marshalJSON(&coordpb.AllocTimestampResponse{First: 1<<63 + 1, Count: 2})))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if m["first"] != json.Number("9223372036854775809") || m["count"] != json.Number("2") {
		t.Errorf("decoded %v", m)
	}
}
