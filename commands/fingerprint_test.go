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

// A CreateBroadcast's ordering guard is not part of what it asks: the same
// request pipelined behind predecessors on one leader and proposed plainly
// on another keeps one fingerprint, proposed and decoded, while anything
// else in the body still changes it.
func TestFingerprintLeavesOutBroadcastOrdering(t *testing.T) {
	plain := MustNew(createBC(func(*logpb.CreateBroadcast) {}))
	plain.RequestID = "r"
	ordered := MustNew(createBC(func(b *logpb.CreateBroadcast) { b.AfterBroadcasts = []uint64{7, 9} }))
	ordered.RequestID = "r"
	other := MustNew(createBC(func(b *logpb.CreateBroadcast) { b.AfterBroadcasts = []uint64{7}; b.Payload = []byte("other") }))
	other.RequestID = "r"
	if !bytes.Equal(Fingerprint(plain), Fingerprint(ordered)) {
		t.Fatal("after_broadcasts changes the request's fingerprint")
	}
	if bytes.Equal(Fingerprint(ordered), Fingerprint(other)) {
		t.Fatal("a different payload kept the fingerprint")
	}
	for _, c := range []Command{plain, ordered, other} {
		data, err := EncodeEntry([]Command{c})
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := DecodeEntry(data)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(Fingerprint(decoded[0]), Fingerprint(c)) {
			t.Fatalf("decoded fingerprint %x, proposed %x", Fingerprint(decoded[0]), Fingerprint(c))
		}
		if got := decoded[0].Body.(*logpb.CreateBroadcast).AfterBroadcasts; len(got) != len(c.Body.(*logpb.CreateBroadcast).AfterBroadcasts) {
			t.Fatalf("after_broadcasts did not survive the log: %v", got)
		}
	}
}
