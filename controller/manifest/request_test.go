package manifest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
)

// TestCommitTakesOnlyCheckedRequests: Commit and CommitBatch take only the
// types NewRequest and NewBatch build, so a request is checked where it
// enters and never again; a zero Request, which skipped the check, is
// refused before anything is locked, read or written.
func TestCommitTakesOnlyCheckedRequests(t *testing.T) {
	f := newFixture(t, Config{})
	f.create(5)
	applied, objects := len(f.l.Applied()), len(f.objects())
	if _, err := f.c.Commit(context.Background(), Request{}); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("Commit(zero Request) = %v, want commands.ErrInvalid", err)
	}
	if out, err := f.c.CommitBatch(context.Background(), Batch{}); err != nil || out != nil {
		t.Fatalf("CommitBatch(empty) = %v, %v, want a no-op", out, err)
	}
	if len(f.l.Applied()) != applied || len(f.objects()) != objects {
		t.Fatalf("an unchecked request changed something: %d → %d commands, %d → %d objects",
			applied, len(f.l.Applied()), objects, len(f.objects()))
	}
}

// TestNewRequestChecksTheCatalogAlone: a bad catalog field is refused by
// the log's catalog check without any pointer (there is none before the
// revision is written), and the message names the field, not a pointer.
func TestNewRequestChecksTheCatalogAlone(t *testing.T) {
	neg := int64(-1)
	for name, cat := range map[string]*coordpb.CatalogMutation{
		"negative rows":   {NumOfRows: &neg},
		"bad stats key":   {Stats: []*coordpb.ManifestStatsEntry{{Key: "../k", Files: []string{"f"}}}},
		"bad stats files": {Stats: []*coordpb.ManifestStatsEntry{{Key: "k", Files: []string{"/abs"}}}},
	} {
		t.Run(name, func(t *testing.T) {
			req := statsReq(5, "k", "f")
			req.Catalog = cat
			_, err := NewRequest(req)
			if !errors.Is(err, commands.ErrInvalid) || Class(err) != "invalid" {
				t.Fatalf("NewRequest = %v, want commands.ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "manifest/") || strings.Contains(err.Error(), "pointer") {
				t.Fatalf("error %q talks about a pointer the request does not have", err)
			}
		})
	}
	if _, err := NewRequest(statsReq(5, "k", "f")); err != nil {
		t.Fatalf("NewRequest(good) = %v", err)
	}
}

// TestNewBatchRules: the batch rules are checked when the batch is parsed,
// before any member is locked.
func TestNewBatchRules(t *testing.T) {
	two := []*coordpb.CommitSegmentManifestRequest{statsReq(5, "k", "f"), statsReq(5, "j", "f")}
	withID := statsReq(6, "k", "f")
	withID.RequestId = "member"
	for name, req := range map[string]*coordpb.CommitSegmentManifestBatchRequest{
		"segment twice":     {Commits: two},
		"member request id": {Commits: []*coordpb.CommitSegmentManifestRequest{statsReq(5, "k", "f"), withID}},
		"batch request id":  {Commits: two[:1], RequestId: strings.Repeat("r", commands.MaxRequestIDBytes+1)},
		"new segment":       {Commits: []*coordpb.CommitSegmentManifestRequest{statsReq(5, "k", "f"), createReq(9)}},
	} {
		if _, err := NewBatch(req); !errors.Is(err, commands.ErrInvalid) {
			t.Errorf("%s: NewBatch = %v, want commands.ErrInvalid", name, err)
		}
	}
	b, err := NewBatch(&coordpb.CommitSegmentManifestBatchRequest{Commits: []*coordpb.CommitSegmentManifestRequest{createReq(9)}})
	if err != nil || b.Len() != 1 {
		t.Fatalf("a batch of one follows the single rules (it may create): %v, %d members", err, b.Len())
	}
}
