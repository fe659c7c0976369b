package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/streamingnode/wal"
)

type violations struct {
	r checker.Result
}

func newResult(name string) *violations {
	return &violations{checker.Result{Checker: name, Verdict: checker.Valid}}
}

func (v *violations) add(format string, args ...any) {
	v.r.Verdict = checker.Invalid
	v.r.Violations++
	if len(v.r.Details) < 20 {
		v.r.Details = append(v.r.Details, fmt.Sprintf(format, args...))
	}
}

type appendOp struct {
	op  history.Op
	in  AppendIn
	out AppendOut
}

// Check runs the four channel checkers: watcher-terms, one-writer-per-term,
// wal-matches-history and wal-terms-monotonic.
func (c *Channels) Check(ops []history.Op, dir string, notes []checker.Annotation) []checker.Result {
	c.mu.Lock()
	obs := append([]Observation(nil), c.obs...)
	sent := map[string][]attempt{}
	for k, v := range c.sent {
		sent[k] = v
	}
	c.mu.Unlock()

	byPayload := map[string]appendOp{}
	pchannels := map[string]bool{}
	var counts [3]int
	for _, o := range ops {
		if o.F != "append" {
			continue
		}
		var a appendOp
		a.op = o
		_ = json.Unmarshal(o.Input, &a.in)
		if o.Type == history.Ok {
			_ = json.Unmarshal(o.Output, &a.out)
			counts[0]++
		} else if o.Type == history.Fail {
			counts[1]++
		} else {
			counts[2]++
		}
		byPayload[a.in.Payload] = a
		pchannels[wal.PChannelOf(a.in.VChannel)] = true
	}

	// (i) watcher-terms.
	wt := newResult("watcher-terms")
	type wkey struct {
		w int
		p string
	}
	lastTerm := map[wkey]Observation{}
	owner := map[string]map[int64]uint64{}
	for _, o := range obs {
		k := wkey{o.Watcher, o.PChannel}
		if prev, ok := lastTerm[k]; ok && o.Term < prev.Term {
			wt.add("watcher %d: %s term went back from %d (node %d, at %.3fs) to %d (node %d, at %.3fs)",
				o.Watcher, o.PChannel, prev.Term, prev.Node, float64(prev.At)/1e9, o.Term, o.Node, float64(o.At)/1e9)
		}
		lastTerm[k] = o
		if owner[o.PChannel] == nil {
			owner[o.PChannel] = map[int64]uint64{}
		}
		if n, ok := owner[o.PChannel][o.Term]; ok && n != o.Node {
			wt.add("%s term %d assigned to node %d and to node %d (watcher %d at %.3fs)", o.PChannel, o.Term, n, o.Node, o.Watcher, float64(o.At)/1e9)
		}
		owner[o.PChannel][o.Term] = o.Node
	}
	nTerms := 0
	for _, m := range owner {
		nTerms += len(m)
	}
	wt.r.Summary = fmt.Sprintf("%d observations by %d watchers, %d (pchannel, term) assignments", len(obs), c.appenders(), nTerms)

	// Read the WALs.
	mw := newResult("wal-matches-history")
	mono := newResult("wal-terms-monotonic")
	one := newResult("one-writer-per-term")
	type pt struct {
		p string
		t int64
	}
	writers := map[pt]map[uint64]string{}
	addWriter := func(p string, t int64, node uint64, why string) {
		k := pt{p, t}
		if writers[k] == nil {
			writers[k] = map[uint64]string{}
		}
		if _, ok := writers[k][node]; !ok {
			writers[k][node] = why
		}
	}
	for _, a := range byPayload {
		if a.op.Type == history.Ok {
			addWriter(wal.PChannelOf(a.in.VChannel), a.out.Term, a.out.Node, "ack of "+a.in.Payload)
		}
	}
	records := map[string][]wal.Record{}
	nrec, nall := 0, 0
	var names []string
	for p := range pchannels {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		recs, err := wal.ReadAll(c.walDir, p, "", 0)
		var ce *wal.CorruptError
		switch {
		case errors.As(err, &ce) && ce.TermRegression:
			// A writer got past the fence: the log goes back in term.
			mono.add("%s: %v", p, err)
		case err != nil:
			mw.add("read WAL of %s: %v", p, err)
		}
		nall += len(recs)
		var prev *wal.Record
		for i := range recs {
			r := recs[i]
			if prev != nil && (r.ID.Term < prev.ID.Term || r.ID.Offset <= prev.ID.Offset) {
				mono.add("%s: record %v follows %v", p, r.ID, prev.ID)
			}
			prev = &recs[i]
			if r.BroadcastID != 0 {
				continue // the broadcast workload's (checked there)
			}
			nrec++
			pl := string(r.Payload)
			records[pl] = append(records[pl], r)
			a, known := byPayload[pl]
			if !known {
				mw.add("%s: record %v (vchannel %s, payload %q) was sent by no client", p, r.ID, r.VChannel, pl)
				continue
			}
			if a.op.Type == history.Fail {
				mw.add("%s: record %v holds %q, whose append failed definitely (%s)", p, r.ID, pl, a.op.Error)
			}
			if r.VChannel != a.in.VChannel {
				mw.add("%s: record %v holds %q for vchannel %s, sent to %s", p, r.ID, pl, r.VChannel, a.in.VChannel)
			}
			matched := false
			for _, at := range sent[pl] {
				if at.Term == r.ID.Term {
					addWriter(p, r.ID.Term, at.Node, fmt.Sprintf("WAL record %v", r.ID))
					matched = true
				}
			}
			if !matched {
				mw.add("%s: record %v holds %q at term %d, which no attempt used (attempts %v)", p, r.ID, pl, r.ID.Term, sent[pl])
			}
		}
	}
	for pl, rs := range records {
		if len(rs) > 1 {
			var ids []string
			for _, r := range rs {
				ids = append(ids, r.ID.String())
			}
			mw.add("payload %q is in the WAL %d times: %v", pl, len(rs), ids)
		}
	}
	for pl, a := range byPayload {
		if a.op.Type != history.Ok {
			continue
		}
		rs := records[pl]
		if len(rs) == 0 {
			mw.add("acknowledged append %q (%s at %d/%d by node %d) is not in the WAL", pl, a.in.VChannel, a.out.Term, a.out.Offset, a.out.Node)
			continue
		}
		if rs[0].ID.Term != a.out.Term || rs[0].ID.Offset != a.out.Offset {
			mw.add("acknowledged append %q at %d/%d is in the WAL at %v", pl, a.out.Term, a.out.Offset, rs[0].ID)
		}
	}
	mw.r.Summary = fmt.Sprintf("%d appends (ok %d, fail %d, info %d), %d client WAL records in %d pchannels", counts[0]+counts[1]+counts[2], counts[0], counts[1], counts[2], nrec, len(names))
	mono.r.Summary = fmt.Sprintf("%d records (appends and broadcasts)", nall)
	for k, ws := range writers {
		if len(ws) > 1 {
			one.add("%s term %d was written by %d nodes: %v", k.p, k.t, len(ws), ws)
		}
	}
	one.r.Summary = fmt.Sprintf("%d (pchannel, term) pairs with writes", len(writers))
	return []checker.Result{wt.r, one.r, mw.r, mono.r}
}
