package fsm

// RecordCount is the number of records the state's snapshot holds (its
// header's record_count), in constant time: the memory guard multiplies
// it by the bytes per record it last measured to estimate the state's
// size on every proposal (docs/operations.md#memory-guard).
func (s *State) RecordCount() uint64 {
	return uint64(4+s.cluster.members.Len()+s.dedup.byID.Len()+
		s.ch.pchannels.Len()+s.ch.nodes.Len()+s.ch.collections.Len()+s.bc.tasks.Len()) +
		s.segmentRecordCount() + s.manifestRecordCount() + s.tokenRecordCount()
}
