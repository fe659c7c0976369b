package commands

import (
	"path/filepath"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

// TestGoldenOldVersions: log bytes written by an older body version (kept
// in testdata/golden_old when a type's version was raised) still decode, as
// that version, to the body they held.
func TestGoldenOldVersions(t *testing.T) {
	t.Run("SaveBinlogPaths v1", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "SaveBinlogPaths.v1.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeSaveBinlogPaths || cs[0].Version != 1 {
			t.Fatalf("decoded %+v", cs)
		}
		b := cs[0].Body.(*logpb.SaveBinlogPaths)
		if b.AfterDml || b.SegmentId != 449326400 || !b.Flushed {
			t.Fatalf("v1 body %v", b)
		}
	})
	t.Run("CreateToken v1", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "CreateToken.v1.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeCreateToken || cs[0].Version != 1 {
			t.Fatalf("decoded %+v", cs)
		}
		if tok := cs[0].Body.(*logpb.CreateToken).Token; tok.Role != logpb.TokenRole_TOKEN_ROLE_NODE || tok.NodeId != 0 || tok.Name != "proxy-1" {
			t.Fatalf("v1 body %v", tok)
		}
	})
	t.Run("RegisterStreamingNode v1", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "RegisterStreamingNode.v1.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeRegisterStreamingNode || cs[0].Version != 1 {
			t.Fatalf("decoded %+v", cs)
		}
		if b := cs[0].Body.(*logpb.RegisterStreamingNode); b.BoundNode != 0 || b.Address != "10.0.0.7:22222" {
			t.Fatalf("v1 body %v", b)
		}
	})
	t.Run("CreateBroadcast v1", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "CreateBroadcast.v1.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeCreateBroadcast || cs[0].Version != 1 {
			t.Fatalf("decoded %+v", cs)
		}
		if b := cs[0].Body.(*logpb.CreateBroadcast); b.IdempotencyKey != "db/1/12:create-books" || len(b.AfterBroadcasts) != 0 {
			t.Fatalf("v1 body %v", b)
		}
	})
	t.Run("CompleteBroadcast v1", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "CompleteBroadcast.v1.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeCompleteBroadcast || cs[0].Version != 1 {
			t.Fatalf("decoded %+v", cs)
		}
		if b := cs[0].Body.(*logpb.CompleteBroadcast); b.BroadcastId != 449326300 || len(b.Checkpoints) != 0 {
			t.Fatalf("v1 body %v", b)
		}
	})
	t.Run("AckBroadcast v2", func(t *testing.T) {
		cs, err := DecodeEntry(readGolden(t, filepath.Join("testdata", "golden_old", "AckBroadcast.v2.hex")))
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) != 1 || cs[0].Type != TypeAckBroadcast || cs[0].Version != 2 {
			t.Fatalf("decoded %+v", cs)
		}
		if b := cs[0].Body.(*logpb.AckBroadcast); b.BroadcastId == 0 || len(b.Checkpoints) == 0 {
			t.Fatalf("v2 body %v", b)
		}
	})
}
