package commands

import (
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// 0x0500.. access control: fixed samples (every field set) for the golden
// files, kept beside the block.
func init() {
	hash := make([]byte, 32)
	for i := range hash {
		hash[i] = byte(i + 1)
	}
	for typ, mk := range map[Type]func() proto.Message{
		TypeCreateToken: func() proto.Message {
			return &logpb.CreateToken{Token: &logpb.TokenRecord{Id: "0123456789abcdef", Name: "proxy-1",
				Role: logpb.TokenRole_TOKEN_ROLE_NODE, SecretSha256: hash, CreatedMs: 1764590400000, Bootstrap: true, NodeId: 3}}
		},
		TypeRevokeToken: func() proto.Message { return &logpb.RevokeToken{Id: "0123456789abcdef"} },
	} {
		fixedSamples[typ] = mk
	}
}
