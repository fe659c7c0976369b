package checker

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// Allocator operations, as the allocator workload records them.
const (
	FAllocTS = "alloc_ts" // AllocTimestamp(count)
	FAllocID = "alloc_id" // AllocID(count)
)

// AllocInput is the input of an allocation.
type AllocInput struct {
	Count uint32 `json:"count"`
}

// AllocOutput is the output of an ok allocation: values First ..
// First+Count-1.
type AllocOutput struct {
	First uint64 `json:"first"`
	Count uint32 `json:"count"`
}

// allocOp is an ok allocation, decoded.
type allocOp struct {
	op          history.Op
	first, last uint64 // inclusive range
}

func (a allocOp) String() string {
	return fmt.Sprintf("#%d client %d %s -> [%d..%d] (invoked %s, completed %s)",
		a.op.Index, a.op.Client, a.op.F, a.first, a.last, ms(a.op.Invoke), ms(a.op.Complete))
}

func ms(ns int64) string { return fmt.Sprintf("%.3fs", float64(ns)/1e9) }

// okAllocs decodes the ok allocations of kind f; decoding problems are
// reported as violations of r (a recorded ok without a usable value is
// itself a bug).
func okAllocs(ops []history.Op, f string, r *Result) []allocOp {
	var out []allocOp
	for _, o := range ops {
		if o.F != f || o.Type != history.Ok {
			continue
		}
		var in AllocInput
		var res AllocOutput
		if err := json.Unmarshal(o.Input, &in); err != nil {
			r.violation("op #%d: bad input %s: %v", o.Index, o.Input, err)
			continue
		}
		if err := json.Unmarshal(o.Output, &res); err != nil {
			r.violation("op #%d: bad output %s: %v", o.Index, o.Output, err)
			continue
		}
		if o.Complete < o.Invoke {
			r.violation("op #%d: completed (%d) before it was invoked (%d)", o.Index, o.Complete, o.Invoke)
			continue
		}
		if res.Count != in.Count || in.Count == 0 {
			r.violation("op #%d: asked for %d values, got %d", o.Index, in.Count, res.Count)
			continue
		}
		out = append(out, allocOp{op: o, first: res.First, last: res.First + uint64(res.Count) - 1})
	}
	return out
}

// AllocUnique checks that no value (ID or timestamp) was handed out twice
// across all ok allocations: the ranges of one kind are pairwise disjoint.
func AllocUnique(ops []history.Op) Result {
	r := Result{Checker: "alloc-unique", Verdict: Valid}
	n := 0
	for _, f := range []string{FAllocTS, FAllocID} {
		as := okAllocs(ops, f, &r)
		n += len(as)
		sort.Slice(as, func(i, j int) bool { return as[i].first < as[j].first })
		// Sweep: the range with the highest end seen so far overlaps any
		// later range starting at or below that end.
		var reach allocOp
		for i, a := range as {
			if i > 0 && a.first <= reach.last {
				r.violation("%s value %d handed out twice: %s and %s", f, a.first, reach, a)
			}
			if i == 0 || a.last > reach.last {
				reach = a
			}
		}
	}
	r.Summary = fmt.Sprintf("%d ok allocations", n)
	if r.Verdict == Invalid {
		r.Summary += fmt.Sprintf(", %d duplicates", r.Violations)
	}
	return r
}

// AllocRealTime checks the allocators' order directly: every ok allocation
// returns values strictly greater than every value returned by any
// allocation that completed before it was invoked. Together with
// AllocUnique this is exactly linearizability for the allocator model, in
// O(n log n); it names the offending pairs precisely.
func AllocRealTime(ops []history.Op) Result {
	r := Result{Checker: "alloc-realtime", Verdict: Valid}
	n := 0
	for _, f := range []string{FAllocTS, FAllocID} {
		as := okAllocs(ops, f, &r)
		n += len(as)
		byComplete := append([]allocOp(nil), as...)
		sort.Slice(byComplete, func(i, j int) bool { return byComplete[i].op.Complete < byComplete[j].op.Complete })
		byInvoke := append([]allocOp(nil), as...)
		sort.Slice(byInvoke, func(i, j int) bool { return byInvoke[i].op.Invoke < byInvoke[j].op.Invoke })
		var best *allocOp // highest value among ops completed so far
		k := 0
		for _, b := range byInvoke {
			for k < len(byComplete) && byComplete[k].op.Complete < b.op.Invoke {
				if best == nil || byComplete[k].last > best.last {
					best = &byComplete[k]
				}
				k++
			}
			if best != nil && b.first <= best.last {
				r.violation("%s went back in real-time order: %s completed before %s was invoked", f, best, b)
			}
		}
	}
	r.Summary = fmt.Sprintf("%d ok allocations", n)
	if r.Verdict == Invalid {
		r.Summary += fmt.Sprintf(", %d ordering violations", r.Violations)
	}
	return r
}

// allocState is the porcupine model state: the smallest value the next
// allocation may return (one past the largest value returned so far).
type allocState = uint64

// porcupine operation payloads.
type (
	pAllocIn struct {
		F     string
		Count uint32
	}
	pAllocOut struct {
		First, Last uint64
	}
)

// AllocModel is the porcupine model of one allocator (timestamps or IDs):
// every allocation returns values strictly greater than every value
// returned before it in the linearization. Histories are partitioned by
// allocator.
//
// Operations with unknown outcomes (info) and failed ones are left out:
// an allocation whose output nobody saw cannot constrain any other
// operation (the model's state is the largest value returned), so "may or
// may not have happened" adds nothing but search space.
var AllocModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			f := o.Input.(pAllocIn).F
			if _, ok := by[f]; !ok {
				keys = append(keys, f)
			}
			by[f] = append(by[f], o)
		}
		sort.Strings(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return allocState(0) },
	Step: func(state, input, output any) (bool, any) {
		next := state.(allocState)
		out := output.(pAllocOut)
		if out.First < next {
			return false, state
		}
		return true, allocState(out.Last + 1)
	},
	Hash: func(state any) uint64 { return state.(allocState) },
	DescribeOperation: func(input, output any) string {
		in, out := input.(pAllocIn), output.(pAllocOut)
		if in.Count == 1 {
			return fmt.Sprintf("%s() -> %d", in.F, out.First)
		}
		return fmt.Sprintf("%s(%d) -> %d..%d", in.F, in.Count, out.First, out.Last)
	},
	DescribeState: func(state any) string {
		return fmt.Sprintf("next >= %d", state.(allocState))
	},
}

// Annotation marks a span (e.g. a fault window) in the visualisation.
type Annotation struct {
	Start, End int64
	Tag, Text  string
}

// AllocLinearizable checks the ok allocations with porcupine. On a
// violation it writes porcupine's HTML visualisation to htmlPath (if set),
// with the annotations overlaid.
func AllocLinearizable(ops []history.Op, timeout time.Duration, htmlPath string, notes []Annotation) Result {
	r := Result{Checker: "linearizable(porcupine)", Verdict: Valid}
	var pops []porcupine.Operation
	for _, f := range []string{FAllocTS, FAllocID} {
		for _, a := range okAllocs(ops, f, &r) {
			pops = append(pops, porcupine.Operation{
				ClientId: a.op.Client,
				Input:    pAllocIn{F: f, Count: uint32(a.last - a.first + 1)},
				Call:     a.op.Invoke,
				Output:   pAllocOut{First: a.first, Last: a.last},
				Return:   a.op.Complete,
				Metadata: fmt.Sprintf("op #%d", a.op.Index),
			})
		}
	}
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(AllocModel, pops, timeout)
	took := time.Since(start).Round(time.Millisecond)
	r.Summary = fmt.Sprintf("%d ok allocations, checked in %v", len(pops), took)
	switch res {
	case porcupine.Ok:
	case porcupine.Unknown:
		r.Verdict = Unknown
		r.Summary += fmt.Sprintf("; timed out after %v", timeout)
	case porcupine.Illegal:
		r.violation("porcupine found no linearization of the allocations")
		if htmlPath != "" {
			_, info := porcupine.CheckOperationsVerbose(AllocModel, pops, timeout)
			var ann []porcupine.Annotation
			for _, n := range notes {
				ann = append(ann, porcupine.Annotation{Tag: n.Tag, Start: n.Start, End: n.End, Description: n.Text,
					BackgroundColor: "#f6d6d6"})
			}
			info.AddAnnotations(ann)
			if err := porcupine.VisualizePath(AllocModel, info, htmlPath); err != nil {
				r.Details = append(r.Details, "visualisation failed: "+err.Error())
			} else {
				r.Artifact = htmlPath
			}
		}
	}
	return r
}
