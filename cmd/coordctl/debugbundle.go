package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

var debugGroup = &group{
	name:    "debug",
	summary: "collect what is needed to debug the cluster",
	cmds: []*command{
		{name: "bundle", args: "FILE", summary: "write a tar.gz of every member's status, metrics, members, log level and recent errors to FILE (via FILE.tmp, then renamed)", bind: bindDebugBundle},
	},
}

func bindDebugBundle(fs *flag.FlagSet) func([]string) (action, error) {
	force := fs.Bool("force", false, "overwrite FILE if it exists")
	logs := fs.String("logs", "", "also take the last 256 KiB of every *.log under `DIR` (a local cluster's data dir, e.g. data/dev: coordd.log and streamingnode.log of every process)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "FILE"); err != nil {
			return action{}, err
		}
		if args[0] == "" {
			return action{}, errors.New("FILE is empty")
		}
		if *logs != "" {
			if fi, err := os.Stat(*logs); err != nil || !fi.IsDir() {
				return action{}, fmt.Errorf("--logs %s is not a directory", *logs)
			}
		}
		file := args[0]
		return action{what: "debug bundle", run: func(ctx context.Context, e *env) error {
			return writeBundle(ctx, e, file, *force, *logs)
		}}, nil
	}
}

// bundle collects the files of a debug bundle in memory; each is small
// (status, metrics text, at most a few hundred log lines per member).
type bundle struct {
	files    []bundleFile
	problems []string // what could not be collected, also in bundle.txt
	now      time.Time
}

type bundleFile struct {
	name string
	data []byte
}

func (b *bundle) add(name string, data []byte) { b.files = append(b.files, bundleFile{name, data}) }

func (b *bundle) addProto(name string, m proto.Message) {
	data, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	var out bytes.Buffer
	if err == nil {
		// protojson varies its spacing on purpose; indent it the one way.
		err = json.Indent(&out, data, "", "  ")
	}
	if err != nil {
		b.problem("%s: %v", name, err)
		return
	}
	b.add(name, append(out.Bytes(), '\n'))
}

func (b *bundle) problem(format string, args ...any) {
	b.problems = append(b.problems, fmt.Sprintf(format, args...))
}

// writeBundle checks FILE before contacting the cluster, asks every member
// for its own view, and writes the archive to FILE.tmp, renamed over FILE
// once complete. A member that does not answer is noted in bundle.txt and
// does not stop the others; when none answers, no file is written.
func writeBundle(ctx context.Context, e *env, file string, force bool, logDir string) (err error) {
	if !force {
		if err := refuseExisting(file); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(filepath.Dir(file)); err != nil || !fi.IsDir() {
		return fmt.Errorf("directory of %s does not exist", file)
	}
	b := &bundle{now: time.Now()}
	members, err := e.c.Members(ctx, coordpb.ReadConsistency_STALE)
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	b.addProto("members.json", &coordpb.MembersResponse{Members: members})
	answered := 0
	for _, m := range members {
		if collectMember(ctx, e, b, m) {
			answered++
		}
	}
	if answered == 0 {
		return fmt.Errorf("no member answered: %s", strings.Join(b.problems, "; "))
	}
	nodes := collectStreamingNodes(ctx, e, b)
	if logDir != "" {
		collectLogs(b, logDir)
	}
	summary := fmt.Sprintf("coordd debug bundle\ncreated: %s\nmembers: %d, answered: %d\nstreaming nodes: %d\n", b.now.UTC().Format(time.RFC3339), len(members), answered, nodes)
	for _, p := range b.problems {
		summary += "not collected: " + p + "\n"
	}
	b.files = append([]bundleFile{{"bundle.txt", []byte(summary)}}, b.files...)

	tmp := file + ".tmp"
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if err := writeTarGz(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	syncDir(filepath.Dir(file))
	fmt.Fprintf(e.out, "wrote %s: %d members, %d answered, %d files\n", file, len(members), answered, len(b.files))
	for _, p := range b.problems {
		fmt.Fprintf(e.errOut, "coordctl: debug bundle: not collected: %s\n", p)
	}
	return nil
}

// collectStreamingNodes adds the PChannel and streaming-node lists (DOWN
// sessions too) and each live node's own Status; it returns how many nodes
// are listed.
func collectStreamingNodes(ctx context.Context, e *env, b *bundle) int {
	if pcs, err := e.c.ListPChannels(ctx, coordpb.ReadConsistency_STALE); err != nil {
		b.problem("pchannels: %s", describe(err, false))
	} else {
		b.addProto("pchannels.json", pcs)
	}
	nodes, err := e.c.ListNodes(ctx, coordpb.ReadConsistency_STALE, true)
	if err != nil {
		b.problem("streaming nodes: %s", describe(err, false))
		return 0
	}
	b.addProto("streaming-nodes.json", &coordpb.ListNodesResponse{Nodes: nodes})
	for _, n := range nodes {
		if n.State == "DOWN" || n.Address == "" {
			continue
		}
		st, err := e.c.StreamingNodeStatus(ctx, n.Address)
		if err != nil {
			b.problem("streaming node %d (%s) status: %s", n.Id, n.Address, describe(err, false))
			continue
		}
		b.addProto(fmt.Sprintf("streaming-nodes/%d/status.json", n.Id), st)
	}
	return len(nodes)
}

// logTailBytes is how much of each log file --logs takes (its end).
const logTailBytes = 256 << 10

// collectLogs adds the tail of every *.log under dir as logs/<path>.
func collectLogs(b *bundle, dir string) {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".log") {
			return nil
		}
		rel, rerr := filepath.Rel(dir, path)
		if rerr != nil {
			return nil
		}
		data, terr := tailFile(path, logTailBytes)
		if terr != nil {
			b.problem("log %s: %v", rel, terr)
			return nil
		}
		b.add("logs/"+filepath.ToSlash(rel), data)
		return nil
	})
	if err != nil {
		b.problem("logs under %s: %v", dir, err)
	}
}

// tailFile reads the last n bytes of path.
func tailFile(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-n, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// collectMember adds one member's files; false when it answered nothing.
func collectMember(ctx context.Context, e *env, b *bundle, m *coordpb.Member) bool {
	dir := "members/" + safeName(m.Id) + "/"
	ok := false
	if m.GrpcAddr == "" {
		b.problem("%s: no gRPC address registered", m.Id)
	} else {
		if st, err := e.c.StatusAt(ctx, m.GrpcAddr); err != nil {
			b.problem("%s status: %s", m.Id, describe(err, false))
		} else {
			b.addProto(dir+"status.json", st)
			ok = true
		}
		if lv, err := e.c.GetLogLevelAt(ctx, m.GrpcAddr); err != nil {
			b.problem("%s log level: %s", m.Id, describe(err, false))
		} else {
			b.addProto(dir+"log-level.json", lv)
		}
		if re, err := e.c.RecentErrorsAt(ctx, m.GrpcAddr, 0); err != nil {
			b.problem("%s recent errors: %s", m.Id, describe(err, false))
		} else {
			b.addProto(dir+"recent-errors.json", re)
		}
	}
	if m.HttpAddr == "" {
		b.problem("%s metrics: no HTTP address registered", m.Id)
	} else if data, err := fetchMetrics(ctx, e, m.HttpAddr); err != nil {
		b.problem("%s metrics: %v", m.Id, err)
	} else {
		b.add(dir+"metrics.txt", data)
		ok = true
	}
	return ok
}

// fetchMetrics reads a member's /metrics with the client's TLS and token
// (the read role suffices).
func fetchMetrics(ctx context.Context, e *env, httpAddr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return e.c.HTTPGet(ctx, httpAddr, "/metrics", 16<<20)
}

// safeName keeps a member ID usable as one path component.
func safeName(id string) string {
	s := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r < ' ' {
			return '_'
		}
		return r
	}, id)
	if s == "" || s == "." || s == ".." {
		return "_" + s
	}
	return s
}

func writeTarGz(path string, b *bundle) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range b.files {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: b.now, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(buf.Bytes()); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
