package commands

import (
	"math"
	"strconv"
	"strings"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Shape limits for segment commands.
const (
	// MaxSegmentsPerCmd bounds the segment IDs one seal or flushing command
	// lists, and the checkpoints one SaveBinlogPaths carries.
	MaxSegmentsPerCmd = 4096
	// MaxFieldsPerSegment bounds the fields of one binlog list.
	MaxFieldsPerSegment = 1024
	// MaxLogsPerField bounds the binlogs of one field in one command.
	MaxLogsPerField = 4096
	// MaxCheckpointsPerCmd bounds one UpdateChannelCheckpoints batch.
	MaxCheckpointsPerCmd = 4096
	// MaxManifestPathBytes bounds a manifest pointer.
	MaxManifestPathBytes = 1024
	// MaxVChannelsPerPrune bounds the dropped VChannels one
	// PruneDroppedVChannels forgets (its result lists them).
	MaxVChannelsPerPrune = 4096
	// DroppedTimestamp is the time tick of a dropped VChannel's checkpoint.
	DroppedTimestamp = ^uint64(0)
)

// Object keys of binlogs, derived from IDs (records store only log IDs).
func InsertLogPath(collection, partition, segment, field, logID int64) string {
	return "insert_log/" + join(collection, partition, segment, field, logID)
}

// StatsLogPath is the key of a statistics log.
func StatsLogPath(collection, partition, segment, field, logID int64) string {
	return "stats_log/" + join(collection, partition, segment, field, logID)
}

// DeltaLogPath is the key of a delete log.
func DeltaLogPath(collection, partition, segment, logID int64) string {
	return "delta_log/" + join(collection, partition, segment, logID)
}

func join(ids ...int64) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	return b.String()
}

// validateSegmentCommand covers the 0x0300 block; ok=false means body is
// not a segment command.
func validateSegmentCommand(body any) (err error, ok bool) {
	switch b := body.(type) {
	case *logpb.CreateSegment:
		if err := validateSegmentChannel(b.CollectionId, b.Vchannel); err != nil {
			return err, true
		}
		if b.PartitionId < 0 {
			return invalid("partition id must not be negative"), true
		}
		return validateOwner(b.NodeId, b.PchannelTerm), true
	case *logpb.SealSegments:
		if b.DecisionTerm == 0 {
			return invalid("SealSegments needs its decision term"), true
		}
		if b.SealTs == 0 || b.SealTs == DroppedTimestamp {
			return invalid("seal timestamp must be a real timestamp"), true
		}
		if b.Reason == logpb.SealReason_SEAL_NONE || logpb.SealReason_name[int32(b.Reason)] == "" {
			return invalid("unknown seal reason %d", b.Reason), true
		}
		if b.CollectionId == 0 && len(b.SegmentIds) == 0 {
			return invalid("SealSegments needs a collection or segment ids"), true
		}
		if b.CollectionId < 0 {
			return invalid("collection id must be positive"), true
		}
		return validateSegmentIDs(b.SegmentIds), true
	case *logpb.MarkSegmentsFlushing:
		if b.DecisionTerm == 0 {
			return invalid("MarkSegmentsFlushing needs its decision term"), true
		}
		if len(b.SegmentIds) == 0 {
			return invalid("MarkSegmentsFlushing needs segment ids"), true
		}
		return validateSegmentIDs(b.SegmentIds), true
	case *logpb.SaveBinlogPaths:
		return validateSaveBinlogPaths(b), true
	case *logpb.CreateImportSegment:
		return validateCreateImportSegment(b), true
	case *logpb.FinishImportSegment:
		return validateFinishImportSegment(b), true
	case *logpb.PruneDroppedSegments:
		if b.DecisionTerm == 0 {
			return invalid("PruneDroppedSegments needs its decision term"), true
		}
		if b.RetentionMs < 1000 {
			return invalid("dropped-segment retention must be at least 1000 ms, got %d", b.RetentionMs), true
		}
		if b.MaxCount == 0 || b.MaxCount > MaxSegmentsPerCmd {
			return invalid("PruneDroppedSegments max count must be in 1..%d, got %d", MaxSegmentsPerCmd, b.MaxCount), true
		}
		return nil, true
	case *logpb.PruneDroppedVChannels:
		if b.DecisionTerm == 0 {
			return invalid("PruneDroppedVChannels needs its decision term"), true
		}
		if b.RetentionMs < 1000 {
			return invalid("dropped-vchannel retention must be at least 1000 ms, got %d", b.RetentionMs), true
		}
		if b.MaxCount == 0 || b.MaxCount > MaxVChannelsPerPrune {
			return invalid("PruneDroppedVChannels max count must be in 1..%d, got %d", MaxVChannelsPerPrune, b.MaxCount), true
		}
		return nil, true
	case *logpb.UpdateChannelCheckpoints:
		if b.NodeId == 0 {
			return invalid("checkpoint update needs a node id"), true
		}
		if len(b.Checkpoints) == 0 || len(b.Checkpoints) > MaxCheckpointsPerCmd {
			return invalid("checkpoint update needs 1..%d checkpoints, got %d", MaxCheckpointsPerCmd, len(b.Checkpoints)), true
		}
		seen := make(map[string]bool, len(b.Checkpoints))
		for _, cp := range b.Checkpoints {
			if _, ok := vocab.CollectionOfVChannel(cp.Vchannel); !ok {
				return invalid("checkpoint for %q: not a vchannel name", cp.Vchannel), true
			}
			if seen[cp.Vchannel] {
				return invalid("vchannel %s appears twice in one checkpoint update", cp.Vchannel), true
			}
			seen[cp.Vchannel] = true
			if cp.PchannelTerm < 1 {
				return invalid("checkpoint for %s: pchannel term must be >= 1", cp.Vchannel), true
			}
			if why := positionProblem(cp.Position); why != "" {
				return invalid("checkpoint for %s: %s", cp.Vchannel, why), true
			}
		}
		return nil, true
	}
	return nil, false
}

func validateSaveBinlogPaths(b *logpb.SaveBinlogPaths) error {
	if err := validateSegmentChannel(b.CollectionId, b.Vchannel); err != nil {
		return err
	}
	if err := validateOwner(b.NodeId, b.PchannelTerm); err != nil {
		return err
	}
	if b.SegmentId <= 0 {
		return invalid("segment id must be positive")
	}
	if b.PartitionId < 0 {
		return invalid("partition id must not be negative")
	}
	if b.Level == logpb.SegmentLevel_LEVEL_UNKNOWN || logpb.SegmentLevel_name[int32(b.Level)] == "" {
		return invalid("unknown segment level %d", b.Level)
	}
	if len(b.ManifestPath) > MaxManifestPathBytes {
		return invalid("manifest path is %d bytes (max %d)", len(b.ManifestPath), MaxManifestPathBytes)
	}
	if b.StorageVersion > 3 {
		return invalid("storage version %d is unknown (0..3)", b.StorageVersion)
	}
	for name, list := range map[string][]*logpb.FieldLogs{"binlogs": b.Binlogs, "statslogs": b.Statslogs} {
		if err := validateFieldLogs(name, list); err != nil {
			return err
		}
	}
	if len(b.Deltalogs) > MaxLogsPerField {
		return invalid("%d deltalogs in one save (max %d)", len(b.Deltalogs), MaxLogsPerField)
	}
	if err := validateLogs("deltalogs", b.Deltalogs); err != nil {
		return err
	}
	if err := validateSums(b); err != nil {
		return err
	}
	if len(b.Checkpoints) > MaxSegmentsPerCmd || len(b.StartPositions) > MaxSegmentsPerCmd {
		return invalid("too many checkpoints or start positions (max %d each)", MaxSegmentsPerCmd)
	}
	for _, cp := range b.Checkpoints {
		if cp.SegmentId <= 0 {
			return invalid("checkpoint with segment id %d", cp.SegmentId)
		}
		if cp.NumOfRows < 0 {
			return invalid("checkpoint of segment %d: negative row count", cp.SegmentId)
		}
		if why := positionProblem(cp.Position); why != "" {
			return invalid("checkpoint of segment %d: %s", cp.SegmentId, why)
		}
	}
	for _, sp := range b.StartPositions {
		if sp.SegmentId <= 0 {
			return invalid("start position with segment id %d", sp.SegmentId)
		}
		if why := positionProblem(sp.Position); why != "" {
			return invalid("start position of segment %d: %s", sp.SegmentId, why)
		}
	}
	return nil
}

// validateSums: one field's entries and all the logs' sizes of one save
// each fit an int64 (a segment's row count and size are such sums; Apply
// checks them again together with the logs the segment holds).
func validateSums(b *logpb.SaveBinlogPaths) error {
	var size int64
	addSizes := func(logs []*logpb.LogRef) bool {
		for _, l := range logs {
			if l.MemorySize > math.MaxInt64-size {
				return false
			}
			size += l.MemorySize
		}
		return true
	}
	for _, list := range [][]*logpb.FieldLogs{b.Binlogs, b.Statslogs} {
		for _, f := range list {
			var rows int64
			for _, l := range f.Logs {
				if l.EntriesNum > math.MaxInt64-rows {
					return invalid("field %d: the entries of its logs add up to more than %d", f.FieldId, int64(math.MaxInt64))
				}
				rows += l.EntriesNum
			}
			if !addSizes(f.Logs) {
				return invalid("the sizes of the save's logs add up to more than %d bytes", int64(math.MaxInt64))
			}
		}
	}
	if !addSizes(b.Deltalogs) {
		return invalid("the sizes of the save's logs add up to more than %d bytes", int64(math.MaxInt64))
	}
	return nil
}

func validateFieldLogs(what string, list []*logpb.FieldLogs) error {
	if len(list) > MaxFieldsPerSegment {
		return invalid("%s: %d fields (max %d)", what, len(list), MaxFieldsPerSegment)
	}
	seen := make(map[int64]bool, len(list))
	for _, f := range list {
		if f.FieldId < 0 {
			return invalid("%s: negative field id %d", what, f.FieldId)
		}
		if seen[f.FieldId] {
			return invalid("%s: field %d listed twice", what, f.FieldId)
		}
		seen[f.FieldId] = true
		if len(f.Logs) > MaxLogsPerField {
			return invalid("%s: field %d has %d logs (max %d)", what, f.FieldId, len(f.Logs), MaxLogsPerField)
		}
		if err := validateLogs(what, f.Logs); err != nil {
			return err
		}
	}
	return nil
}

func validateLogs(what string, logs []*logpb.LogRef) error {
	for _, l := range logs {
		if l.LogId <= 0 {
			return invalid("%s: log id must be positive, got %d", what, l.LogId)
		}
		if l.EntriesNum < 0 || l.MemorySize < 0 {
			return invalid("%s: log %d has a negative entry count or size", what, l.LogId)
		}
		if l.TimestampTo < l.TimestampFrom {
			return invalid("%s: log %d ends (%d) before it starts (%d)", what, l.LogId, l.TimestampTo, l.TimestampFrom)
		}
	}
	return nil
}

func validateSegmentIDs(ids []int64) error {
	if len(ids) > MaxSegmentsPerCmd {
		return invalid("%d segment ids in one command (max %d)", len(ids), MaxSegmentsPerCmd)
	}
	seen := make(map[int64]bool, len(ids))
	for _, id := range ids {
		if id <= 0 {
			return invalid("segment id must be positive, got %d", id)
		}
		if seen[id] {
			return invalid("segment %d listed twice", id)
		}
		seen[id] = true
	}
	return nil
}

func validateSegmentChannel(collection int64, vchannel string) error {
	if collection <= 0 {
		return invalid("collection id must be positive, got %d", collection)
	}
	coll, ok := vocab.CollectionOfVChannel(vchannel)
	if !ok {
		return invalid("%q is not a vchannel name", vchannel)
	}
	if coll != collection {
		return invalid("vchannel %s belongs to collection %d, not %d", vchannel, coll, collection)
	}
	return nil
}

func validateOwner(node uint64, term int64) error {
	if node == 0 {
		return invalid("node id must be positive")
	}
	if term < 1 {
		return invalid("pchannel term must be >= 1, got %d", term)
	}
	return nil
}

// positionProblem says what is wrong with a reported position ("" when
// nothing is; the caller names the position only on failure, so success
// allocates nothing): it must be present; the dropped sentinel is
// never accepted from a caller (only a drop sets it).
func positionProblem(p *logpb.WALPosition) string {
	switch {
	case p == nil:
		return "position is missing"
	case p.Timestamp == DroppedTimestamp:
		return "the dropped sentinel cannot be reported"
	case p.Term < 0:
		return "negative message term"
	}
	return ""
}
