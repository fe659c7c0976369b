package commands

import (
	"crypto/sha256"
	"encoding/binary"
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
		// The same bytes EncodeEntry writes. A body that cannot be encoded
		// never reaches the log, so its error does not matter here.
		body, _ = marshal.Marshal(c.Body)
	}
	return fingerprintOf(c.Type, body)
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
