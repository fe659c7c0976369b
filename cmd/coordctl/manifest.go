package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/controller/manifest"
)

// Segment manifest commits (docs/semantics.md#manifests).

var manifestGroup = &group{name: "manifest", summary: "read and commit segment manifests", cmds: []*command{
	{name: "get", args: "SEGMENT_ID", summary: "show a segment's manifest pointer and its decoded revision", bind: bindManifestGet},
	{name: "commit", args: "SEGMENT_ID", summary: "commit one mutation (--mutation FILE or --add-stats KEY=PATH ...; --expected VERSION with a prepared revision)", bind: bindManifestCommit},
	{name: "commit-batch", args: "FILE", summary: "commit many segments in one command (FILE: {\"commits\":[...]} in protojson form)", bind: bindManifestCommitBatch},
	{name: "gc", args: "", summary: "collect orphan manifest revisions now (--dry-run: only list them)", bind: bindManifestGC},
}}

type columnGroupJSON struct {
	FieldIDs []int64  `json:"field_ids"`
	Files    []string `json:"files"`
}

type indexEntryJSON struct {
	BuildID        int64    `json:"build_id"`
	IndexID        int64    `json:"index_id"`
	FieldID        int64    `json:"field_id"`
	Files          []string `json:"files"`
	SerializedSize int64    `json:"serialized_size"`
}

type revisionJSON struct {
	FormatVersion uint32              `json:"format_version"`
	SegmentID     int64               `json:"segment_id"`
	Version       int64               `json:"version"`
	ColumnGroups  []columnGroupJSON   `json:"column_groups"`
	DeltaLogs     []string            `json:"delta_logs"`
	Stats         map[string][]string `json:"stats"`
	Indexes       []indexEntryJSON    `json:"indexes"`
}

type manifestJSON struct {
	SegmentID    int64               `json:"segment_id"`
	Base         string              `json:"base"`
	Version      int64               `json:"version"`
	Revision     *revisionJSON       `json:"revision"`
	CatalogStats map[string][]string `json:"catalog_stats"`
	IndexRecords []indexEntryJSON    `json:"index_records"`
}

func statsMap(in []*coordpb.ManifestStatsEntry) map[string][]string {
	out := map[string][]string{}
	for _, s := range in {
		out[s.Key] = append([]string{}, s.Files...)
	}
	return out
}

func indexesJSON(in []*coordpb.ManifestIndexEntry) []indexEntryJSON {
	out := []indexEntryJSON{}
	for _, ix := range in {
		out = append(out, indexEntryJSON{BuildID: ix.BuildId, IndexID: ix.IndexId, FieldID: ix.FieldId,
			Files: append([]string{}, ix.Files...), SerializedSize: ix.SerializedSize})
	}
	return out
}

func toManifestJSON(m *coordpb.GetSegmentManifestResponse) manifestJSON {
	out := manifestJSON{SegmentID: m.SegmentId, Base: m.Base, Version: m.Version,
		CatalogStats: statsMap(m.CatalogStats), IndexRecords: indexesJSON(m.IndexRecords)}
	if r := m.Revision; r != nil {
		rj := &revisionJSON{FormatVersion: r.FormatVersion, SegmentID: r.SegmentId, Version: r.Version,
			ColumnGroups: []columnGroupJSON{}, DeltaLogs: append([]string{}, r.DeltaLogs...), Stats: statsMap(r.Stats), Indexes: indexesJSON(r.Indexes)}
		for _, g := range r.ColumnGroups {
			rj.ColumnGroups = append(rj.ColumnGroups, columnGroupJSON{FieldIDs: append([]int64{}, g.FieldIds...), Files: append([]string{}, g.Files...)})
		}
		out.Revision = rj
	}
	return out
}

func parseSegmentID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("SEGMENT_ID must be a positive integer, got %q", s)
	}
	return id, nil
}

func bindManifestGet(fs *flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "SEGMENT_ID"); err != nil {
			return action{}, err
		}
		id, err := parseSegmentID(args[0])
		if err != nil {
			return action{}, err
		}
		return action{what: "manifest get", run: func(ctx context.Context, e *env) error {
			m, err := e.c.GetSegmentManifest(ctx, id)
			if err != nil {
				return err
			}
			mj := toManifestJSON(m)
			if e.json {
				return writeJSON(e.out, mj)
			}
			tw := newTable(e.out)
			fmt.Fprintf(tw, "segment\t%d\nbase\t%s\nversion\t%d\n", mj.SegmentID, dash(mj.Base), mj.Version)
			if r := mj.Revision; r != nil {
				for _, g := range r.ColumnGroups {
					fmt.Fprintf(tw, "column group %v\t%s\n", g.FieldIDs, strings.Join(g.Files, " "))
				}
				for _, d := range r.DeltaLogs {
					fmt.Fprintf(tw, "delta log\t%s\n", d)
				}
				for _, k := range slices.Sorted(maps.Keys(r.Stats)) {
					fmt.Fprintf(tw, "stats %s\t%s\n", k, strings.Join(r.Stats[k], " "))
				}
				for _, ix := range r.Indexes {
					fmt.Fprintf(tw, "index build %d (index %d, field %d)\t%s\n", ix.BuildID, ix.IndexID, ix.FieldID, strings.Join(ix.Files, " "))
				}
			}
			return tw.Flush()
		}}, nil
	}
}

func bindManifestCommit(fs *flag.FlagSet) func([]string) (action, error) {
	mutationFile := fs.String("mutation", "", "the mutation: a ManifestMutation in protojson form in `FILE`")
	catalogFile := fs.String("catalog", "", "the catalog mutation: a CatalogMutation in protojson form in `FILE`")
	expected := fs.String("expected", "", "the `VERSION` the segment must be at (only with a publish_prepared mutation)")
	var stats listFlag
	fs.Var(&stats, "add-stats", "add stats `KEY=PATH` (repeatable; several paths of one key are its files)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "SEGMENT_ID"); err != nil {
			return action{}, err
		}
		id, err := parseSegmentID(args[0])
		if err != nil {
			return action{}, err
		}
		req := &coordpb.CommitSegmentManifestRequest{SegmentId: id}
		switch {
		case *mutationFile != "" && len(stats) > 0:
			return action{}, errors.New("give --mutation FILE or --add-stats KEY=PATH, not both")
		case *mutationFile != "":
			req.Mutation = &coordpb.ManifestMutation{}
			if err := readJSONFile(*mutationFile, req.Mutation); err != nil {
				return action{}, err
			}
		case len(stats) > 0:
			if req.Mutation, err = addStatsMutation(stats); err != nil {
				return action{}, err
			}
		default:
			return action{}, errors.New("a commit needs --mutation FILE or --add-stats KEY=PATH")
		}
		if *catalogFile != "" {
			req.Catalog = &coordpb.CatalogMutation{}
			if err := readJSONFile(*catalogFile, req.Catalog); err != nil {
				return action{}, err
			}
		}
		if *expected != "" {
			v, err := strconv.ParseInt(*expected, 10, 64)
			if err != nil || v < 0 {
				return action{}, fmt.Errorf("--expected must be a version (an integer >= 0), got %q", *expected)
			}
			req.ExpectedVersion = &v
		}
		if _, err := manifest.NewRequest(req); err != nil {
			return action{}, trimManifestInvalid(err)
		}
		return action{what: "manifest commit", mutates: true, run: func(ctx context.Context, e *env) error {
			resp, err := e.c.CommitSegmentManifest(ctx, req)
			if err != nil {
				return manifestRefusal(e, id, err)
			}
			if e.json {
				return writeJSON(e.out, struct {
					SegmentID int64 `json:"segment_id"`
					Version   int64 `json:"version"`
				}{resp.SegmentId, resp.Version})
			}
			fmt.Fprintf(e.out, "segment %d: published version %d at %s\n", resp.SegmentId, resp.Version, resp.BasePath)
			return nil
		}}, nil
	}
}

func addStatsMutation(stats []string) (*coordpb.ManifestMutation, error) {
	add := &coordpb.AddStats{}
	for _, kv := range stats {
		k, p, ok := strings.Cut(kv, "=")
		if !ok || k == "" || p == "" {
			return nil, fmt.Errorf("--add-stats %q: want KEY=PATH", kv)
		}
		found := false
		for _, s := range add.Stats {
			if s.Key == k {
				s.Files, found = append(s.Files, p), true
			}
		}
		if !found {
			add.Stats = append(add.Stats, &coordpb.ManifestStatsEntry{Key: k, Files: []string{p}})
		}
	}
	return &coordpb.ManifestMutation{Kind: &coordpb.ManifestMutation_AddStats{AddStats: add}}, nil
}

func trimManifestInvalid(err error) error {
	return fmt.Errorf("invalid: %s", trimInvalid(err))
}

// manifestRefusal reports a refused commit with its class: stale (with
// the expected and current versions), not found, or invalid. With -o json
// the same is printed as {"error", "segment_id", "expected", "current",
// "message"}. The command exits 1 either way.
func manifestRefusal(e *env, id int64, err error) error {
	class := ""
	var exp, cur int64
	if s, ok := client.AsManifestStale(err); ok {
		class, exp, cur = "stale", s.Expected, s.Current
	} else {
		switch status.Code(err) {
		case codes.NotFound:
			class = "not found"
		case codes.InvalidArgument:
			class = "invalid"
		}
	}
	if class == "" {
		return err
	}
	msg := describe(err, true)
	if e.json {
		_ = writeJSON(e.out, struct {
			Error     string `json:"error"`
			SegmentID int64  `json:"segment_id"`
			Expected  *int64 `json:"expected,omitempty"`
			Current   *int64 `json:"current,omitempty"`
			Message   string `json:"message"`
		}{Error: class, SegmentID: id, Expected: ptrIf(class == "stale", exp), Current: ptrIf(class == "stale", cur), Message: msg})
	}
	if class == "stale" {
		return fmt.Errorf("stale: expected version %d, current version %d: %s", exp, cur, msg)
	}
	return fmt.Errorf("%s: %s", class, msg)
}

func ptrIf(ok bool, v int64) *int64 {
	if !ok {
		return nil
	}
	return &v
}

func bindManifestCommitBatch(fs *flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "FILE"); err != nil {
			return action{}, err
		}
		req := &coordpb.CommitSegmentManifestBatchRequest{}
		if err := readJSONFile(args[0], req); err != nil {
			return action{}, err
		}
		if _, err := manifest.NewBatch(&coordpb.CommitSegmentManifestBatchRequest{Commits: req.Commits}); err != nil {
			return action{}, trimManifestInvalid(err)
		}
		return action{what: "manifest commit-batch", mutates: true, run: func(ctx context.Context, e *env) error {
			out, err := e.c.CommitSegmentManifestBatch(ctx, req.Commits)
			if err != nil {
				return manifestRefusal(e, 0, err)
			}
			type resultJSON struct {
				SegmentID int64 `json:"segment_id"`
				Version   int64 `json:"version"`
				Skipped   bool  `json:"skipped"`
			}
			res := []resultJSON{}
			for _, r := range out {
				res = append(res, resultJSON{r.SegmentId, r.Version, r.Skipped})
			}
			if e.json {
				return writeJSON(e.out, struct {
					Results []resultJSON `json:"results"`
				}{res})
			}
			tw := newTable(e.out)
			fmt.Fprintln(tw, "SEGMENT\tVERSION\tSKIPPED")
			for _, r := range res {
				fmt.Fprintf(tw, "%d\t%d\t%v\n", r.SegmentID, r.Version, r.Skipped)
			}
			return tw.Flush()
		}}, nil
	}
}

func bindManifestGC(fs *flag.FlagSet) func([]string) (action, error) {
	dry := fs.Bool("dry-run", false, "list the orphans, delete nothing")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		return action{what: "manifest gc", mutates: !*dry, run: func(ctx context.Context, e *env) error {
			rep, err := e.c.CollectManifestOrphans(ctx, *dry)
			if err != nil {
				return err
			}
			out := struct {
				Found   []string `json:"found"`
				Removed []string `json:"removed"`
				Young   uint32   `json:"young"`
				DryRun  bool     `json:"dry_run"`
			}{append([]string{}, rep.Found...), append([]string{}, rep.Removed...), rep.Young, *dry}
			if e.json {
				return writeJSON(e.out, out)
			}
			fmt.Fprintf(e.out, "orphans found: %d, removed: %d, inside the grace period: %d\n", len(out.Found), len(out.Removed), out.Young)
			for _, k := range out.Found {
				fmt.Fprintf(e.out, "  %s\n", k)
			}
			return nil
		}}, nil
	}
}

// readJSONFile reads FILE (protojson form; unknown fields refused) into m.
func readJSONFile(file string, m proto.Message) error {
	if file == "" {
		return errors.New("FILE is empty")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := protojson.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%s: not a %s in protojson form: %v", file, m.ProtoReflect().Descriptor().Name(), err)
	}
	return nil
}
