package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/checker"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/streamingnode/wal"
)

// broadcast-at-most-once (issue 34 item 8): no broadcast message was
// appended twice to any WAL and no call made two tasks, under leader
// kills and transfers, with half the calls carrying no idempotency key
// (only the request ID the SDK gives each call makes its resends after an
// unknown outcome harmless), and with a claim writer putting records
// under upcoming broadcast IDs (nemesis/claim.go, broadcast_claims.go).
//
// A logical call is every op with one payload (a repeat with the same
// idempotency key is the same call). Its tasks are every broadcast ID that
// an ok answer named, that a WAL record with its payload carries, or that
// coordd lists with its idempotency key. The rules:
//
//  1. a call's payload is in each VChannel's WAL at most once;
//  2. a call has at most one task, and a task belongs to one call (all of
//     a broadcast ID's records carry one payload);
//  3. a call every op of which failed with a definite "nothing done"
//     (history fail) has no task and no record; a call with an unknown
//     outcome may have one;
//  4. an acknowledged call's message, with its payload, is in every
//     target's WAL under its broadcast ID (the targets coordd lists, the
//     CChannel included, when the final listing has the task);
//  5. no record carries a claim's payload under a broadcast ID: a forged
//     record accepted under a broadcast's key.
//
// A claim "hit" is a claim that named the broadcast ID and VChannel of a
// broadcast coordd made (so, before the key spaces were split, it could
// have taken its place); the summary counts them.

// walRec is one WAL record with an ID: a broadcast's (BroadcastID) or a
// DML message's (DedupID).
type walRec struct {
	VChannel  string
	Broadcast uint64
	Dedup     uint64
	Payload   string
	ID        wal.MessageID
}

// readIDRecords reads every PChannel's WAL under dir and returns its
// records that carry an ID.
func readIDRecords(dir string) ([]walRec, []string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, []string{fmt.Sprintf("read the WAL directory %s: %v", dir, err)}
	}
	var out []walRec
	var errs []string
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		recs, err := wal.ReadAll(dir, e.Name(), "", 0)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Sprintf("read the WAL of %s: %v", e.Name(), err))
		}
		for _, r := range recs {
			if r.BroadcastID != 0 || r.DedupID != 0 {
				out = append(out, walRec{VChannel: r.VChannel, Broadcast: r.BroadcastID, Dedup: r.DedupID, Payload: string(r.Payload), ID: r.ID})
			}
		}
	}
	return out, errs
}

func (b *Broadcast) checkAtMostOnce(ops []history.Op) checker.Result {
	recs, errs := readIDRecords(b.walDir)
	return atMostOnce(ops, recs, errs, b.ClaimPrefix)
}

// call is one logical broadcast call.
type call struct {
	in             BroadcastIn
	idem           string // the scoped key coordd lists, "" without one
	ok, fail, info int
	answered       map[uint64]bool // IDs ok answers named
	tasks          map[uint64]bool // every task of the call (rule 2)
}

func (c *call) outcome() string {
	switch {
	case c.ok > 0:
		return "acknowledged"
	case c.info > 0:
		return "unknown"
	}
	return "failed"
}

type vkey struct {
	vchannel string
	id       uint64
}

// atMostOnce judges the broadcast ops, the records with IDs (readErrs:
// WALs that could not be read) and the claim writer's ops (f starting
// with claimPrefix; none when claimPrefix is "").
func atMostOnce(ops []history.Op, recs []walRec, readErrs []string, claimPrefix string) checker.Result {
	v := newResult("broadcast-at-most-once")
	for _, e := range readErrs {
		v.add("%s", e)
	}
	calls, order := gatherCalls(ops)
	list, listed := taskList(ops)

	byPayloadV := map[string]map[string][]uint64{} // payload -> vchannel -> broadcast IDs
	payloadsOf := map[uint64]map[string]bool{}     // broadcast ID -> payloads of its records
	rec := map[vkey]walRec{}                       // broadcast records by (vchannel, ID)
	dml := map[vkey]int{}                          // DML records by (vchannel, dedup ID)
	nb := 0
	for _, r := range recs {
		if r.Broadcast == 0 {
			dml[vkey{r.VChannel, r.Dedup}]++
			continue
		}
		nb++
		rec[vkey{r.VChannel, r.Broadcast}] = r
		if payloadsOf[r.Broadcast] == nil {
			payloadsOf[r.Broadcast] = map[string]bool{}
		}
		payloadsOf[r.Broadcast][r.Payload] = true
		if strings.HasPrefix(r.Payload, claimPayloadPrefix) {
			v.add("a claim's record is in %s under broadcast %d at %v: a forged record was accepted under a broadcast's key", r.VChannel, r.Broadcast, r.ID)
		}
		c := calls[r.Payload]
		if c == nil {
			continue // another kind of broadcast (an operator's replication update)
		}
		c.tasks[r.Broadcast] = true
		if byPayloadV[r.Payload] == nil {
			byPayloadV[r.Payload] = map[string][]uint64{}
		}
		byPayloadV[r.Payload][r.VChannel] = append(byPayloadV[r.Payload][r.VChannel], r.Broadcast)
	}
	// Rule 2, a task of one call: one payload per broadcast ID.
	for id, ps := range payloadsOf {
		if len(ps) > 1 {
			v.add("broadcast %d has records with %d different payloads: %s", id, len(ps), strings.Join(sortedKeys(ps), ", "))
		}
	}
	// Rule 1: once per VChannel.
	dupRecs := 0
	for _, p := range order {
		for vch, ids := range byPayloadV[p] {
			if len(ids) > 1 {
				dupRecs += len(ids) - 1
				v.add("call %s (%s) is in the WAL of %s %d times, as broadcasts %v", p, calls[p].outcome(), vch, len(ids), ids)
			}
		}
	}
	// Tasks coordd lists: by idempotency key to their call.
	byIdem := map[string]*call{}
	for _, p := range order {
		if c := calls[p]; c.idem != "" {
			byIdem[c.idem] = c
		}
	}
	unattributed, byKey := 0, 0
	for _, t := range list.Tasks {
		c := byIdem[t.Idem]
		if t.Idem != "" && c != nil {
			c.tasks[t.ID] = true
			byKey++
		}
		if t.Type == broadcastType && c == nil && payloadsOf[t.ID] == nil && !answered(calls, t.ID) {
			unattributed++ // never appended, no key: a task with no trace of its call
		}
	}
	for _, p := range order {
		c := calls[p]
		for id := range c.answered {
			c.tasks[id] = true
		}
	}
	// Rules 2 and 3 per call, rule 4 per acknowledged call.
	landed := 0
	outcomes := map[string]int{}
	for _, p := range order {
		c := calls[p]
		outcomes[c.outcome()]++
		ids := sortedIDs(c.tasks)
		switch {
		case len(ids) > 1:
			v.add("call %s (%s, %s) made %d tasks: broadcasts %v", p, c.outcome(), keyed(c), len(ids), ids)
		case c.outcome() == "failed" && len(ids) > 0:
			v.add("call %s failed with a definite answer (nothing done) but has broadcast %v", p, ids)
		}
		if c.outcome() != "acknowledged" {
			continue
		}
		for _, id := range sortedIDs(c.answered) {
			for _, vch := range targetsOf(c, id, list) {
				r, ok := rec[vkey{vch, id}]
				switch {
				case !ok:
					v.add("acknowledged call %s: broadcast %d is not in the WAL of %s", p, id, vch)
				case r.Payload != p:
					v.add("acknowledged call %s: the record of broadcast %d in %s carries %q, not the call's payload", p, id, vch, r.Payload)
				default:
					landed++
				}
			}
		}
	}
	claims := claimFigures(ops, claimPrefix, rec, dml)
	v.r.Summary = fmt.Sprintf("%d calls (%d acknowledged, %d unknown, %d failed; %d without idempotency key), %d broadcast records, %d duplicate records; "+
		"%d acknowledged messages found with their payload; %s; %s",
		len(order), outcomes["acknowledged"], outcomes["unknown"], outcomes["failed"], unkeyed(calls), nb, dupRecs, landed,
		listing(list, listed, byKey, unattributed), claims)
	return v.r
}

// broadcastType is the message type the workload broadcasts.
const broadcastType = "AlterAlias"

// gatherCalls groups the broadcast ops by payload, in order of first
// invocation.
func gatherCalls(ops []history.Op) (map[string]*call, []string) {
	calls := map[string]*call{}
	var order []string
	for _, o := range ops {
		if o.F != "broadcast" {
			continue
		}
		var in BroadcastIn
		if decode(o.Input, &in) != nil {
			continue
		}
		c := calls[in.Payload]
		if c == nil {
			c = &call{in: in, answered: map[uint64]bool{}, tasks: map[uint64]bool{}}
			if in.Idem != "" {
				c.idem, _ = client.IdempotencyKey{Scope: client.ScopeCollection, ScopeID: in.IdemScope, Key: in.Idem}.Scoped()
			}
			calls[in.Payload] = c
			order = append(order, in.Payload)
		}
		switch o.Type {
		case history.Ok:
			var out BroadcastOut
			if decode(o.Output, &out) == nil && out.ID != 0 {
				c.answered[out.ID] = true
			}
			c.ok++
		case history.Fail:
			c.fail++
		default:
			c.info++
		}
	}
	return calls, order
}

// targetsOf is where an acknowledged call's broadcast id must be: the
// task's targets as coordd lists them (the CChannel included), or the
// call's own VChannels if the listing does not have it.
func targetsOf(c *call, id uint64, list TaskList) []string {
	for _, t := range list.Tasks {
		if t.ID == id {
			return t.VChannels
		}
	}
	return c.in.VChannels
}

func listing(list TaskList, listed bool, byKey, unattributed int) string {
	if !listed {
		return "no final task listing"
	}
	s := fmt.Sprintf("%d tasks listed", len(list.Tasks))
	if !list.Settled {
		s += " (some still pending)"
	}
	if len(list.Tasks) >= client.MaxListBroadcasts {
		s += " (the listing may have been cut at its limit)"
	}
	return fmt.Sprintf("%s, %d matched to their call by idempotency key, %d %s tasks with no trace of their call (never appended, no idempotency key)",
		s, byKey, unattributed, broadcastType)
}

func answered(calls map[string]*call, id uint64) bool {
	for _, c := range calls {
		if c.answered[id] {
			return true
		}
	}
	return false
}

func keyed(c *call) string {
	if c.idem == "" {
		return "no idempotency key"
	}
	return "idempotency key " + c.idem
}

func unkeyed(calls map[string]*call) int {
	n := 0
	for _, c := range calls {
		if c.idem == "" {
			n++
		}
	}
	return n
}

func sortedIDs(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func decode(b []byte, v any) error {
	if len(b) == 0 {
		return errors.New("empty")
	}
	return json.Unmarshal(b, v)
}
