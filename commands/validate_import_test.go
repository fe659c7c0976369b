package commands

import (
	"errors"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

func TestValidateImportCommands(t *testing.T) {
	const vch = "by-dev-rootcoord-dml_1_100v0"
	ptr := ManifestPointer{Base: ManifestBase(100, 1, 7), Version: 1}.String()
	create := func(e func(*logpb.CreateImportSegment)) *logpb.CreateImportSegment {
		b := &logpb.CreateImportSegment{CollectionId: 100, PartitionId: 1, Vchannel: vch, NodeId: 1, PchannelTerm: 2, Level: logpb.SegmentLevel_LEVEL_L1}
		if e != nil {
			e(b)
		}
		return b
	}
	finish := func(e func(*logpb.FinishImportSegment)) *logpb.FinishImportSegment {
		b := &logpb.FinishImportSegment{SegmentId: 7, CollectionId: 100, Vchannel: vch, NodeId: 1, PchannelTerm: 2, ManifestPath: ptr, NumOfRows: 10}
		if e != nil {
			e(b)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		body any
		want string // "" = valid
	}{
		{"valid create", create(nil), ""},
		{"create L2", create(func(b *logpb.CreateImportSegment) { b.Level = logpb.SegmentLevel_LEVEL_L2 }), ""},
		{"create L0", create(func(b *logpb.CreateImportSegment) { b.Level = logpb.SegmentLevel_LEVEL_L0 }), "L1 or L2"},
		{"create no level", create(func(b *logpb.CreateImportSegment) { b.Level = 0 }), "L1 or L2"},
		{"create other collection", create(func(b *logpb.CreateImportSegment) { b.CollectionId = 101 }), "belongs to collection"},
		{"create no node", create(func(b *logpb.CreateImportSegment) { b.NodeId = 0 }), "node id"},
		{"create term 0", create(func(b *logpb.CreateImportSegment) { b.PchannelTerm = 0 }), "pchannel term"},
		{"create negative partition", create(func(b *logpb.CreateImportSegment) { b.PartitionId = -1 }), "partition"},
		{"valid finish", finish(nil), ""},
		{"finish no rows is valid (dropped)", finish(func(b *logpb.FinishImportSegment) { b.NumOfRows = 0 }), ""},
		{"finish negative rows", finish(func(b *logpb.FinishImportSegment) { b.NumOfRows = -1 }), "negative row count"},
		{"finish no segment", finish(func(b *logpb.FinishImportSegment) { b.SegmentId = 0 }), "segment id"},
		{"finish no pointer", finish(func(b *logpb.FinishImportSegment) { b.ManifestPath = "" }), "version >= 1"},
		{"finish version 0", finish(func(b *logpb.FinishImportSegment) { b.ManifestPath = `{"ver":0,"base_path":"a/b"}` }), "version >= 1"},
		{"finish garbage pointer", finish(func(b *logpb.FinishImportSegment) { b.ManifestPath = "manifest-3" }), "not {"},
		{"finish bad base", finish(func(b *logpb.FinishImportSegment) { b.ManifestPath = `{"ver":1,"base_path":"../x"}` }), "'..'"},
		{"finish huge pointer", finish(func(b *logpb.FinishImportSegment) { b.ManifestPath = strings.Repeat("x", MaxManifestPathBytes+1) }), "bytes"},
		{"finish not a vchannel", finish(func(b *logpb.FinishImportSegment) { b.Vchannel = "nope" }), "not a vchannel"},
		{"finish stale-shaped owner", finish(func(b *logpb.FinishImportSegment) { b.PchannelTerm = -3 }), "pchannel term"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err, ok := validateSegmentCommand(tc.body)
			if !ok {
				t.Fatal("not recognised as a segment command")
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want an invalid-argument error containing %q", err, tc.want)
			}
		})
	}
}
