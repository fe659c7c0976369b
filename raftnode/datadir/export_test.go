package datadir

import "github.com/hashicorp/raft"

// WithLogReach puts a LogReachFile writer in dir in front of logs (empty),
// for the log store benchmark.
func WithLogReach(dir string, logs raft.LogStore) (raft.LogStore, error) {
	rf, err := openReachFile(dir, reachRecord{}, false, 0)
	if err != nil {
		return nil, err
	}
	return newReachingLogStore(logs, rf, 0, 0), nil
}
