package commands

import (
	"bytes"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

func TestFingerprint(t *testing.T) {
	a := MustNew(&logpb.ReserveIDs{Count: 10})
	a.RequestID = "r"
	same := a
	same.LeaderTerm, same.ProposedAtUnixMs = 9, 12345 // a retry via another leader
	other := MustNew(&logpb.ReserveIDs{Count: 11})
	otherType := MustNew(&logpb.ExtendTSOWindow{LimitPhysicalMs: 10})
	if fa := Fingerprint(a); len(fa) != FingerprintBytes || !bytes.Equal(fa, Fingerprint(same)) {
		t.Fatalf("fingerprint %x (len %d) differs for the same request stamped differently (%x)", fa, len(fa), Fingerprint(same))
	}
	if bytes.Equal(Fingerprint(a), Fingerprint(other)) || bytes.Equal(Fingerprint(a), Fingerprint(otherType)) {
		t.Fatal("different requests share a fingerprint")
	}
	// Apply sees decoded commands: their fingerprint, taken from the log
	// bytes, must equal the proposer's.
	data, err := EncodeEntry([]Command{a})
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodeEntry(data)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Fingerprint(decoded[0]), Fingerprint(a)) {
		t.Fatalf("decoded fingerprint %x, proposed %x", Fingerprint(decoded[0]), Fingerprint(a))
	}
	// An ignorable type this binary does not know is fingerprinted from its
	// bytes too, like on a replica that knows it.
	env := &logpb.Envelope{Type: uint32(Ignorable | 0x0777), Version: 1, RequestId: "r", Body: []byte{0x08, 0x01}}
	c, err := decodeEnvelope(env)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(Fingerprint(c), fingerprintOf(Ignorable|0x0777, env.Body)) {
		t.Fatal("an unknown ignorable command is fingerprinted without its body")
	}
}
