package commands

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// segmentDecodeSeeds: the 0x0300 block as one batch, bodies the validators
// (not the decoder) must refuse, and malformed encodings (FuzzDecode seeds).
func segmentDecodeSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	var batch []Command
	for _, typ := range registeredTypes() {
		if typ >= TypeCreateSegment && typ < Ignorable {
			batch = append(batch, sampleCommand(tb, typ))
		}
	}
	data, err := EncodeEntry(batch)
	if err != nil {
		tb.Fatal(err)
	}
	out = append(out, data)
	v := vocab.VChannelName("p_0", 7, 0)
	for _, body := range []proto.Message{
		&logpb.CreateSegment{},
		&logpb.CreateSegment{CollectionId: 8, Vchannel: v, NodeId: 1, PchannelTerm: 1},
		&logpb.CreateSegment{CollectionId: 7, Vchannel: "p_0_vcchan", NodeId: 1, PchannelTerm: 1},
		&logpb.SealSegments{SegmentIds: []int64{1, 1}, SealTs: 1, Reason: logpb.SealReason_SEAL_FLUSH, DecisionTerm: 1},
		&logpb.SealSegments{CollectionId: 7, SealTs: DroppedTimestamp, Reason: 99, DecisionTerm: 1},
		&logpb.MarkSegmentsFlushing{SegmentIds: []int64{-1}},
		&logpb.PruneDroppedSegments{RetentionMs: 1, MaxCount: 1 << 20},
		&logpb.PruneDroppedVChannels{RetentionMs: 1, MaxCount: 1 << 20},
		&logpb.SaveBinlogPaths{CollectionId: 7, Vchannel: v, NodeId: 1, PchannelTerm: 1, SegmentId: 1, Level: 9},
		&logpb.SaveBinlogPaths{CollectionId: 7, Vchannel: v, NodeId: 1, PchannelTerm: 1, SegmentId: 1, Level: logpb.SegmentLevel_LEVEL_L1,
			Binlogs:     []*logpb.FieldLogs{{FieldId: 1, Logs: []*logpb.LogRef{{LogId: 1, TimestampFrom: 5, TimestampTo: 4}}}, {FieldId: 1}},
			Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: 1}}},
		&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
			{Vchannel: v, PchannelTerm: 1, Position: &logpb.WALPosition{Timestamp: DroppedTimestamp}}, {Vchannel: v}}},
	} {
		c := MustNew(body)
		out = append(out, rawEnvelope(uint32(c.Type), 1, "seg", mustMarshalTB(tb, body)))
	}
	out = append(out,
		rawEnvelope(uint32(TypeSaveBinlogPaths), 3, "", nil),                                     // newer version
		rawEnvelope(uint32(TypeSaveBinlogPaths), 1, "", []byte{0x42, 0x04, 0x0a, 0x02, 0x08}),    // truncated field logs
		rawEnvelope(uint32(TypeUpdateChannelCheckpoints), 1, "", []byte{0x12, 0x03, 0x0a, 0xff}), // bad nested string
		rawEnvelope(0x0307, 1, "", nil),                                                          // next unassigned number in the block
	)
	return out
}

// FuzzValidateSegments: the segment validators never panic, their only
// verdict is ErrInvalid, and what they accept obeys the contract: the
// VChannel names the collection, the owner is (node > 0, term >= 1), and no
// caller can report the dropped sentinel.
func FuzzValidateSegments(f *testing.F) {
	f.Add("p_0_7v0", int64(7), uint64(1), int64(1), uint64(5), int64(3), int64(100))
	f.Add("p_0_7v0", int64(8), uint64(0), int64(0), DroppedTimestamp, int64(0), int64(-1))
	f.Add("p_0_vcchan", int64(7), uint64(1), int64(-3), uint64(0), int64(1), int64(0))
	f.Add("p_0_07v0", int64(7), uint64(1), int64(1), uint64(1), int64(1), int64(1))
	f.Add(strings.Repeat("p", 300), int64(1), uint64(1), int64(1), uint64(1), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, vch string, collection int64, node uint64, term int64, ts uint64, seg int64, field int64) {
		coll, named := vocab.CollectionOfVChannel(vch)
		check := func(what string, err error, contract bool) {
			t.Helper()
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s: error %v does not wrap ErrInvalid", what, err)
			}
			if err == nil && !contract {
				t.Fatalf("%s accepted input outside its contract (vch %q coll %d node %d term %d ts %d seg %d field %d)",
					what, vch, collection, node, term, ts, seg, field)
			}
		}
		owner := node > 0 && term >= 1
		inColl := named && coll == collection && collection > 0
		check("CreateSegment", Validate(MustNew(&logpb.CreateSegment{CollectionId: collection, Vchannel: vch, NodeId: node, PchannelTerm: term})),
			inColl && owner)
		pos := &logpb.WALPosition{Term: term, Offset: uint64(seg), Timestamp: ts}
		check("UpdateChannelCheckpoints", Validate(MustNew(&logpb.UpdateChannelCheckpoints{NodeId: node,
			Checkpoints: []*logpb.ChannelCheckpointUpdate{{Vchannel: vch, PchannelTerm: term, Position: pos}}})),
			named && node > 0 && term >= 1 && ts != DroppedTimestamp)
		check("SaveBinlogPaths", Validate(MustNew(&logpb.SaveBinlogPaths{CollectionId: collection, Vchannel: vch, NodeId: node,
			PchannelTerm: term, SegmentId: seg, Level: logpb.SegmentLevel_LEVEL_L1,
			Binlogs:     []*logpb.FieldLogs{{FieldId: field, Logs: []*logpb.LogRef{{LogId: seg, TimestampFrom: 1, TimestampTo: ts}}}},
			Checkpoints: []*logpb.SegmentCheckpointUpdate{{SegmentId: seg, Position: pos}}})),
			inColl && owner && seg > 0 && field >= 0 && ts >= 1 && ts != DroppedTimestamp)
		check("SealSegments", Validate(MustNew(&logpb.SealSegments{SegmentIds: []int64{seg}, SealTs: ts,
			Reason: logpb.SealReason_SEAL_IDLE, DecisionTerm: node})), seg > 0 && ts != 0 && ts != DroppedTimestamp && node > 0)
		if named {
			if p := vocab.PChannelOf(vch); !strings.HasPrefix(vch, p+"_") {
				t.Fatalf("vchannel %q maps to pchannel %q", vch, p)
			}
		}
	})
}
