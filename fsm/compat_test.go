package fsm

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// rawEntry encodes envelopes as a newer binary would write them, bodies
// included, without this binary's encoder (which only knows its own types).
func rawEntry(t *testing.T, envs ...*logpb.Envelope) []byte {
	t.Helper()
	b, err := proto.Marshal(&logpb.Entry{Commands: envs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func knownEnvelope(t *testing.T, c commands.Command) *logpb.Envelope {
	t.Helper()
	data, err := commands.EncodeEntry([]commands.Command{c})
	if err != nil {
		t.Fatal(err)
	}
	var e logpb.Entry
	if err := proto.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return e.Commands[0]
}

// TestOlderReplicaSkipsIgnorableCommands is the rolling-upgrade contract
// (docs/operations.md#rolling-upgrade): an entry from a newer leader mixing
// known commands with a command of a type this replica does not know but
// that carries the Ignorable bit applies the known ones and skips the other
// (accepted, nothing changed, its request ID recorded); the replica ends in
// the state a replica that never saw the unknown command reaches. A type
// without the bit, or a newer version of a known type, stops the replica
// instead: Apply fails and the state is untouched.
func TestOlderReplicaSkipsIgnorableCommands(t *testing.T) {
	start := build(t, base()...)
	idx := start.AppliedIndex() + 1
	reserve := knownEnvelope(t, reserveIDs(5))
	newer := &logpb.Envelope{Type: uint32(commands.Ignorable | 0x0601), Version: 2, RequestId: "from-v2",
		Body: []byte{0x0a, 0x03, 'n', 'e', 'w', 0x10, 0x07}}
	reserve2 := knownEnvelope(t, reserveIDs(2))

	got, results, err := start.Apply(idx, rawEntry(t, reserve, newer, reserve2))
	if err != nil {
		t.Fatalf("an older replica stopped on an ignorable command: %v", err)
	}
	if len(results) != 3 || results[1].GetRejection() != nil || results[1].GetValue() != nil {
		t.Fatalf("results %v: want the unknown command accepted with no value", results)
	}
	want, _, err := start.Apply(idx, rawEntry(t, reserve, reserve2))
	if err != nil {
		t.Fatal(err)
	}
	if got.DedupLen() != want.DedupLen()+1 {
		t.Fatalf("the skipped command's request ID was not recorded (%d entries, want %d)", got.DedupLen(), want.DedupLen()+1)
	}
	if got.NextID() != want.NextID() || got.AppliedIndex() != want.AppliedIndex() || !sameChannelView(got, want) {
		t.Fatal("skipping the unknown command changed more than its request ID")
	}

	before := snapshotBytes(t, start)
	for name, env := range map[string]*logpb.Envelope{
		"unknown type without the Ignorable bit": {Type: 0x0601, Version: 1, Body: newer.Body},
		"newer version of a known type":          {Type: reserve.Type, Version: reserve.Version + 1, Body: reserve.Body},
	} {
		_, _, err := start.Apply(idx, rawEntry(t, reserve, env))
		if err == nil {
			t.Fatalf("%s: applied; an older replica must stop rather than diverge", name)
		}
		if !errors.Is(err, commands.ErrUnknownType) && !errors.Is(err, commands.ErrNewerVersion) {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(before, snapshotBytes(t, start)) {
			t.Fatalf("%s: the refused entry changed the state", name)
		}
	}
}
