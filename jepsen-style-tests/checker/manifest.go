package checker

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

// History functions of the manifest workload.
const (
	// FManifestCommit: input ManifestCommitIn, output ManifestCommitOut.
	FManifestCommit = "manifest-commit"
	// FManifestRead: input ManifestReadIn, output ManifestReadOut.
	FManifestRead = "manifest-read"
	// FManifestFinal is a read after the heal (same shapes); the last one
	// of each segment is what every acknowledged commit must be in.
	FManifestFinal = "manifest-final"
)

// ManifestCommitIn is one commit: AddStats of a key unique to this commit.
type ManifestCommitIn struct {
	Segment int64  `json:"segment"`
	Key     string `json:"key"`
}

// ManifestCommitOut is the version the commit published.
type ManifestCommitOut struct {
	Version int64 `json:"version"`
}

// ManifestReadIn names the segment read.
type ManifestReadIn struct {
	Segment int64 `json:"segment"`
}

// ManifestReadOut is the published version and the stats keys of its
// decoded revision.
type ManifestReadOut struct {
	Version int64    `json:"version"`
	Keys    []string `json:"keys"`
}

// manifestState is the porcupine model state of one segment: the version
// last published in the linearization and the keys its revision holds at
// least (exactly, when exact: the state was set by a read of version V).
// Keys are sorted and joined with "\n" so states compare as values.
type manifestState struct {
	V     int64
	Keys  string
	Exact bool
}

type pManifestIn struct {
	Commit  bool
	Segment int64
	Key     string
}

type pManifestOut struct {
	Version int64
	Keys    []string // reads only, sorted
}

func joinKeys(keys []string) string { return strings.Join(keys, "\n") }

func splitKeys(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// manifestModel is a per-segment versioned register with compare-and-
// publish: a commit publishes a version greater than the current one whose
// revision holds every key published before plus its own; a read sees the
// current version and exactly its keys. Commits with unknown outcome are
// left out of the search (they constrain nothing by their output), so a
// read may also hold keys of those commits (infoKeys), and versions may
// advance past what the linearized commits explain; once a read saw such
// a key it must stay.
func manifestModel(infoKeys map[string]bool) porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[int64][]porcupine.Operation{}
			var segs []int64
			for _, o := range h {
				s := o.Input.(pManifestIn).Segment
				if _, ok := by[s]; !ok {
					segs = append(segs, s)
				}
				by[s] = append(by[s], o)
			}
			sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
			var out [][]porcupine.Operation
			for _, s := range segs {
				out = append(out, by[s])
			}
			return out
		},
		Init: func() any { return manifestState{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(manifestState), input.(pManifestIn), output.(pManifestOut)
			if in.Commit {
				if out.Version <= s.V {
					return false, state
				}
				keys := splitKeys(s.Keys)
				if i := sort.SearchStrings(keys, in.Key); i == len(keys) || keys[i] != in.Key {
					keys = append(keys, "")
					copy(keys[i+1:], keys[i:])
					keys[i] = in.Key
				}
				return true, manifestState{V: out.Version, Keys: joinKeys(keys)}
			}
			if out.Version < s.V {
				return false, state
			}
			have := map[string]bool{}
			for _, k := range out.Keys {
				have[k] = true
			}
			prev := splitKeys(s.Keys)
			for _, k := range prev {
				if !have[k] {
					return false, state // an update published before is missing
				}
			}
			if out.Version == s.V && s.Exact && len(out.Keys) != len(prev) {
				return false, state // same version, different content
			}
			was := map[string]bool{}
			for _, k := range prev {
				was[k] = true
			}
			for _, k := range out.Keys {
				if !was[k] && !infoKeys[k] {
					return false, state // an acknowledged commit not yet linearized
				}
			}
			return true, manifestState{V: out.Version, Keys: joinKeys(out.Keys), Exact: true}
		},
		Equal: func(a, b any) bool { return a.(manifestState) == b.(manifestState) },
		DescribeOperation: func(input, output any) string {
			in, out := input.(pManifestIn), output.(pManifestOut)
			if in.Commit {
				return fmt.Sprintf("commit(%d, %s) -> v%d", in.Segment, in.Key, out.Version)
			}
			return fmt.Sprintf("read(%d) -> v%d, %d keys", in.Segment, out.Version, len(out.Keys))
		},
		DescribeState: func(state any) string {
			s := state.(manifestState)
			return fmt.Sprintf("v%d, %d keys", s.V, len(splitKeys(s.Keys)))
		},
	}
}

// manifestOps converts the workload's ok commits and reads into porcupine
// operations, and collects the keys of commits with unknown outcome.
func manifestOps(ops []history.Op, r *Result) ([]porcupine.Operation, map[string]bool) {
	var pops []porcupine.Operation
	info := map[string]bool{}
	for _, op := range ops {
		switch op.F {
		case FManifestCommit:
			var in ManifestCommitIn
			if err := json.Unmarshal(op.Input, &in); err != nil {
				r.violation("op #%d: bad input: %v", op.Index, err)
				continue
			}
			if op.Type == history.Info {
				info[in.Key] = true
			}
			if op.Type != history.Ok {
				continue
			}
			var out ManifestCommitOut
			if err := json.Unmarshal(op.Output, &out); err != nil {
				r.violation("op #%d: bad output: %v", op.Index, err)
				continue
			}
			pops = append(pops, porcupine.Operation{ClientId: op.Client, Input: pManifestIn{Commit: true, Segment: in.Segment, Key: in.Key},
				Call: op.Invoke, Output: pManifestOut{Version: out.Version}, Return: op.Complete, Metadata: fmt.Sprintf("op #%d", op.Index)})
		case FManifestRead, FManifestFinal:
			if op.Type != history.Ok {
				continue
			}
			var in ManifestReadIn
			var out ManifestReadOut
			if err := json.Unmarshal(op.Input, &in); err != nil {
				r.violation("op #%d: bad input: %v", op.Index, err)
				continue
			}
			if err := json.Unmarshal(op.Output, &out); err != nil {
				r.violation("op #%d: bad output: %v", op.Index, err)
				continue
			}
			keys := append([]string(nil), out.Keys...)
			sort.Strings(keys)
			pops = append(pops, porcupine.Operation{ClientId: op.Client, Input: pManifestIn{Segment: in.Segment},
				Call: op.Invoke, Output: pManifestOut{Version: out.Version, Keys: keys}, Return: op.Complete, Metadata: fmt.Sprintf("op #%d", op.Index)})
		}
	}
	return pops, info
}

// ManifestLinearizable checks the manifest commits and reads with
// porcupine against the per-segment compare-and-publish register. On a
// violation it writes porcupine's visualisation to htmlPath (if set).
func ManifestLinearizable(ops []history.Op, timeout time.Duration, htmlPath string, notes []Annotation) Result {
	r := Result{Checker: "manifest-linearizable(porcupine)", Verdict: Valid}
	pops, info := manifestOps(ops, &r)
	model := manifestModel(info)
	start := time.Now()
	res, vis := porcupine.CheckOperationsVerbose(model, pops, timeout)
	r.Summary = fmt.Sprintf("%d ok commits and reads (%d commits with unknown outcome), checked in %v", len(pops), len(info),
		time.Since(start).Round(time.Millisecond))
	switch res {
	case porcupine.Unknown:
		r.Verdict = Unknown
		r.Summary += fmt.Sprintf("; timed out after %v", timeout)
	case porcupine.Illegal:
		r.violation("porcupine found no linearization of the manifest commits and reads")
		if htmlPath != "" {
			var ann []porcupine.Annotation
			for _, n := range notes {
				ann = append(ann, porcupine.Annotation{Tag: n.Tag, Start: n.Start, End: n.End, Description: n.Text, BackgroundColor: "#f6d6d6"})
			}
			vis.AddAnnotations(ann)
			if err := porcupine.VisualizePath(model, vis, htmlPath); err != nil {
				r.Details = append(r.Details, "visualisation failed: "+err.Error())
			} else {
				r.Artifact = htmlPath
			}
		}
	}
	return r
}

// ManifestAcknowledgedPresent: the last final read of every segment holds
// every acknowledged commit's key, and only keys of commits that were
// acknowledged or whose outcome is unknown; published versions never go
// back between a segment's final reads.
func ManifestAcknowledgedPresent(ops []history.Op) Result {
	r := Result{Checker: "manifest-acknowledged-present", Verdict: Valid}
	acked := map[int64][]string{}
	possible := map[string]bool{}
	final := map[int64]ManifestReadOut{}
	for _, op := range ops {
		switch {
		case op.F == FManifestCommit && op.Type != history.Fail:
			var in ManifestCommitIn
			if json.Unmarshal(op.Input, &in) != nil {
				continue
			}
			possible[in.Key] = true
			if op.Type == history.Ok {
				acked[in.Segment] = append(acked[in.Segment], in.Key)
			}
		case op.F == FManifestFinal && op.Type == history.Ok:
			var in ManifestReadIn
			var out ManifestReadOut
			if json.Unmarshal(op.Input, &in) != nil || json.Unmarshal(op.Output, &out) != nil {
				r.violation("op #%d: undecodable final read", op.Index)
				continue
			}
			if prev, ok := final[in.Segment]; ok && out.Version < prev.Version {
				r.violation("segment %d: a final read saw version %d after version %d", in.Segment, out.Version, prev.Version)
			}
			final[in.Segment] = out
		}
	}
	for seg, fr := range final {
		for _, k := range fr.Keys {
			if !possible[k] {
				r.violation("segment %d: key %q in the final revision was never committed (or its commit failed)", seg, k)
			}
		}
	}
	n := 0
	for seg, keys := range acked {
		fr, ok := final[seg]
		if !ok {
			r.violation("segment %d: no final read (%d acknowledged commits unchecked)", seg, len(keys))
			continue
		}
		have := map[string]bool{}
		for _, k := range fr.Keys {
			have[k] = true
		}
		for _, k := range keys {
			n++
			if !have[k] {
				r.violation("segment %d: acknowledged commit %q is missing from the final revision (version %d)", seg, k, fr.Version)
			}
		}
	}
	r.Summary = fmt.Sprintf("%d acknowledged commits over %d segments checked against the final revisions", n, len(final))
	if n == 0 && r.Verdict == Valid {
		r.Verdict = Unknown
		r.Summary += "; nothing was acknowledged"
	}
	return r
}
