package commands

import (
	"crypto/sha256"
	"encoding/binary"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
)

// FingerprintBytes is the length of a request fingerprint.
const FingerprintBytes = 16

// Fingerprint identifies what a command asks for: a hash of its type and
// its deterministically encoded body, leaving out what a retry may change
// (the time and term the leader stamps). A request ID stands for one
// request, so every command carrying it must have the same fingerprint.
func Fingerprint(c Command) []byte {
	if c.fingerprint != nil {
		return c.fingerprint
	}
	var body []byte
	if c.Body != nil {
		if id, ok := identityOf(c.Type, c.Body); ok {
			return fingerprintOf(c.Type, id)
		}
		// The same bytes EncodeEntry writes. A body that cannot be encoded
		// never reaches the log, so its error does not matter here.
		body, _ = marshal.Marshal(c.Body)
	}
	return fingerprintOf(c.Type, body)
}

// identityOf encodes what of body names the request when its type leaves
// something out (requestIdentity), and reports whether it does.
func identityOf(t Type, body proto.Message) ([]byte, bool) {
	strip := requestIdentity[t]
	if strip == nil {
		return nil, false
	}
	id, changed := strip(body)
	if !changed {
		return nil, false
	}
	enc, _ := marshal.Marshal(id)
	return enc, true
}

// requestIdentity lists, per type, what a body carries that does not name
// the request: each function returns the body without it, and whether
// there was any. A retry of the same request may differ in it and keeps
// its fingerprint.
var requestIdentity = map[Type]func(proto.Message) (proto.Message, bool){
	// after_broadcasts says when a leader may apply the create (one leader
	// pipelines it behind conflicting completions, another after them),
	// not what is asked.
	TypeCreateBroadcast: func(body proto.Message) (proto.Message, bool) {
		b, ok := body.(*logpb.CreateBroadcast)
		if !ok || len(b.AfterBroadcasts) == 0 {
			return body, false
		}
		id := proto.Clone(b).(*logpb.CreateBroadcast)
		id.AfterBroadcasts = nil
		return id, true
	},
}

// fingerprintOf hashes a type and an encoded body.
func fingerprintOf(t Type, body []byte) []byte {
	h := sha256.New()
	var tb [4]byte
	binary.BigEndian.PutUint32(tb[:], uint32(t))
	h.Write(tb[:])
	h.Write(body)
	return h.Sum(nil)[:FingerprintBytes]
}
