package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
)

// Manifest commits: under the segment's lock, the next revision is written
// to the object store (an exclusive create: temporary file, fsync, link),
// then the segment's pointer is moved in one etcd transaction that
// compares the pointer's current value. The benchmark's mutations are
// CreateManifest, AppendData and AddStats.

type manifestState struct {
	version  int64
	pointer  string // the stored pointer value
	revision *coordpb.ManifestRevision
}

type manifestServer struct {
	coordpb.UnimplementedManifestServiceServer
	cat    *catalog
	objDir string
}

func manifestKey(seg int64) string { return fmt.Sprintf("datacoord-meta/manifest/%d", seg) }

func (m *manifestServer) CommitSegmentManifest(ctx context.Context, r *coordpb.CommitSegmentManifestRequest) (*coordpb.CommitSegmentManifestResponse, error) {
	seg := m.cat.segment(r.SegmentId)
	if seg == nil {
		return nil, status.Errorf(codes.NotFound, "segment %d not found", r.SegmentId)
	}
	seg.mu.Lock()
	defer seg.mu.Unlock()
	if seg.info.State == "Dropped" {
		return nil, status.Errorf(codes.NotFound, "segment %d is dropped", r.SegmentId)
	}
	cur := seg.manifest
	next, err := mutate(cur, r.SegmentId, r.Mutation)
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("manifests/%d/%d", seg.info.CollectionId, r.SegmentId)
	data, err := proto.Marshal(next)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode revision: %v", err)
	}
	if err := createFile(filepath.Join(m.objDir, base, "manifest-"+strconv.FormatInt(next.Version, 10)), data); err != nil {
		return nil, status.Errorf(codes.Unavailable, "write revision: %v", err)
	}
	pointer := base + "@" + strconv.FormatInt(next.Version, 10)
	cmp := clientv3.Compare(clientv3.CreateRevision(manifestKey(r.SegmentId)), "=", 0)
	if cur != nil {
		cmp = clientv3.Compare(clientv3.Value(manifestKey(r.SegmentId)), "=", cur.pointer)
	}
	err = m.cat.kv.txn(ctx, []clientv3.Cmp{cmp}, []clientv3.Op{clientv3.OpPut(manifestKey(r.SegmentId), pointer)})
	if errors.Is(err, errConflict) {
		return nil, status.Errorf(codes.Aborted, "segment %d: manifest pointer moved", r.SegmentId)
	}
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "publish manifest: %v", err)
	}
	seg.manifest = &manifestState{version: next.Version, pointer: pointer, revision: next}
	return &coordpb.CommitSegmentManifestResponse{SegmentId: r.SegmentId, BasePath: base, Version: next.Version}, nil
}

// mutate returns the next revision.
func mutate(cur *manifestState, seg int64, mu *coordpb.ManifestMutation) (*coordpb.ManifestRevision, error) {
	if cr := mu.GetCreate(); cr != nil {
		if cur != nil {
			return nil, status.Errorf(codes.Aborted, "segment %d already has a manifest", seg)
		}
		return &coordpb.ManifestRevision{FormatVersion: 1, SegmentId: seg, Version: 1, ColumnGroups: cr.ColumnGroups, DeltaLogs: cr.DeltaLogs}, nil
	}
	if cur == nil {
		return nil, status.Errorf(codes.InvalidArgument, "segment %d has no manifest yet", seg)
	}
	next := proto.Clone(cur.revision).(*coordpb.ManifestRevision)
	next.Version++
	switch {
	case mu.GetAddStats() != nil:
		for _, st := range mu.GetAddStats().Stats {
			i := slices.IndexFunc(next.Stats, func(e *coordpb.ManifestStatsEntry) bool { return e.Key == st.Key })
			if i >= 0 {
				next.Stats[i] = st
			} else {
				next.Stats = append(next.Stats, st)
			}
		}
	case mu.GetAppendData() != nil:
		for _, g := range mu.GetAppendData().ColumnGroups {
			i := slices.IndexFunc(next.ColumnGroups, func(e *coordpb.ManifestColumnGroup) bool { return slices.Equal(e.FieldIds, g.FieldIds) })
			if i >= 0 {
				next.ColumnGroups[i].Files = append(next.ColumnGroups[i].Files, g.Files...)
			} else {
				next.ColumnGroups = append(next.ColumnGroups, g)
			}
		}
		next.DeltaLogs = append(next.DeltaLogs, mu.GetAppendData().DeltaLogs...)
	default:
		return nil, status.Error(codes.Unimplemented, "etcdcoord implements create, append_data and add_stats only")
	}
	return next, nil
}

// createFile is an exclusive create of a whole, synced file.
func createFile(final string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), ".create-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	return os.Link(tmp.Name(), final)
}
