package main

import (
	"strings"

	"github.com/coordd/coordd/cluster"
	"github.com/coordd/coordd/proc"
)

// Where a coordd commit round goes, from the members' own metrics (raft's
// go-metrics timers are in milliseconds; coordd's propose histogram is in
// seconds). Each figure is a mean over the cell: the difference of a
// summary's _sum divided by the difference of its _count, read on every
// member before and after the measured pass.
//
//   - propose_ms: raftnode.Propose to its result on the leader (queueing
//     for a batch, the raft round, apply, the reply to the waiter);
//   - leader_store_ms: raft.leader.dispatchLog, the leader's StoreLogs;
//   - commit_ms: raft.commitTime, from the leader taking a batch to its
//     commit (the leader's store, then replication to a quorum);
//   - replicate_rpc_ms: raft.replication.appendEntries.rpc, one
//     AppendEntries round trip to a follower (its store included);
//   - follower_store_ms: raft.rpc.appendEntries.storeLogs on followers;
//   - apply_ms: raft.fsm.applyBatch on the leader, per applied batch;
//   - entries_per_dispatch: log entries per leader StoreLogs.
//
// The client's latency minus propose_ms is the RPC stack, the handler and
// the hop from the member the client called to the leader.
var roundTimers = []struct{ key, metric string }{
	{"leader_store_ms", "coordd_raft_leader_dispatchLog"},
	{"commit_ms", "coordd_raft_commitTime"},
	{"apply_ms", "coordd_raft_fsm_applyBatch"},
}

// roundSample is one scrape of every member.
type roundSample struct {
	leader    map[string]float64
	followers []map[string]float64
}

func sampleRound(l *cluster.Launcher, leaderHTTP string) roundSample {
	var s roundSample
	for _, m := range l.Members() {
		mt, err := scrape(m.HTTPAddr)
		if err != nil {
			continue
		}
		if m.HTTPAddr == leaderHTTP {
			s.leader = mt
		} else {
			s.followers = append(s.followers, mt)
		}
	}
	return s
}

// mean of a summary between two scrapes, or -1 when it did not move.
func mean(a, b map[string]float64, metric string) float64 {
	n := b[metric+"_count"] - a[metric+"_count"]
	if n <= 0 {
		return -1
	}
	return (b[metric+"_sum"] - a[metric+"_sum"]) / n
}

// meanPrefix pools every series whose name starts with prefix and ends in
// _sum/_count (raft names the per-follower replication timers by peer).
func meanPrefix(a, b map[string]float64, prefix string) float64 {
	var sum, n float64
	for k, v := range b {
		if !strings.HasPrefix(k, prefix) || strings.Contains(k, "{") {
			continue
		}
		switch {
		case strings.HasSuffix(k, "_sum"):
			sum += v - a[k]
		case strings.HasSuffix(k, "_count"):
			n += v - a[k]
		}
	}
	if n <= 0 {
		return -1
	}
	return sum / n
}

// roundBreakdown turns two samples into the figures above (milliseconds,
// rounded to 0.01).
func roundBreakdown(a, b roundSample) map[string]float64 {
	if a.leader == nil || b.leader == nil {
		return nil
	}
	out := map[string]float64{}
	put := func(k string, v float64) {
		if v >= 0 {
			out[k] = float64(int64(v*100+0.5)) / 100
		}
	}
	if p := mean(a.leader, b.leader, "coordd_propose_duration_seconds"); p >= 0 {
		put("propose_ms", p*1000)
	}
	for _, t := range roundTimers {
		put(t.key, mean(a.leader, b.leader, t.metric))
	}
	put("replicate_rpc_ms", meanPrefix(a.leader, b.leader, "coordd_raft_replication_appendEntries_rpc_"))
	var fs, fn float64
	for i := range b.followers {
		if i >= len(a.followers) {
			break
		}
		m := "coordd_raft_rpc_appendEntries_storeLogs"
		fs += b.followers[i][m+"_sum"] - a.followers[i][m+"_sum"]
		fn += b.followers[i][m+"_count"] - a.followers[i][m+"_count"]
	}
	if fn > 0 {
		put("follower_store_ms", fs/fn)
	}
	if d := b.leader["coordd_raft_leader_dispatchLog_count"] - a.leader["coordd_raft_leader_dispatchLog_count"]; d > 0 {
		put("entries_per_dispatch", (b.leader["coordd_fsm_applied_index"]-a.leader["coordd_fsm_applied_index"])/d)
	}
	return out
}

// cpuSeconds is a process's user plus system CPU time from /proc.
func cpuSeconds(pid int) (float64, error) { return proc.CPUSeconds(pid) }

// cpuOf sums the CPU seconds of the named processes.
func cpuOf(pids map[string]int) float64 {
	var total float64
	for _, pid := range pids {
		if s, err := cpuSeconds(pid); err == nil {
			total += s
		}
	}
	return total
}
