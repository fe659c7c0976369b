package grpcserver

import (
	"crypto/sha256"
	"fmt"
	"hash"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// SaveSnapshot streams the state machine at a linearizable point (every
// write acknowledged before the call is in it) for a backup: the state's
// position (cluster ID, index, term), its snapshot bytes, and their size and
// SHA-256. Only the leader serves it: a follower's state may trail.
func (s *Server) SaveSnapshot(_ *coordpb.SaveSnapshotRequest, stream grpc.ServerStreamingServer[coordpb.SaveSnapshotChunk]) error {
	ctx := stream.Context()
	st, err := s.node.LinearizableRead(ctx)
	if err != nil {
		return s.toStatus(ctx, err)
	}
	index := st.AppliedIndex()
	term, err := s.node.EntryTerm(index)
	if err != nil {
		// Terms only grow, so the current term bounds the entry's term from
		// above: still safe for a restored cluster's first term.
		term = s.node.Raft().CurrentTerm()
		s.logger.Warn("backup: using the current term", "index", index, "term", term, "reason", err)
	}
	meta := &coordpb.BackupMeta{ClusterId: s.node.ClusterID(), Index: index, Term: term, LeaderId: s.self.ID}
	if err := stream.Send(&coordpb.SaveSnapshotChunk{Part: &coordpb.SaveSnapshotChunk_Meta{Meta: meta}}); err != nil {
		return err
	}
	w := &backupWriter{stream: stream, sum: sha256.New()}
	if err := st.WriteSnapshot(w); err != nil {
		return s.toStatus(ctx, fmt.Errorf("write snapshot: %w", err))
	}
	end := &coordpb.BackupEnd{Size: w.n, Sha256: w.sum.Sum(nil)}
	return stream.Send(&coordpb.SaveSnapshotChunk{Part: &coordpb.SaveSnapshotChunk_End{End: end}})
}

// backupWriter sends snapshot bytes as data chunks, hashing them.
type backupWriter struct {
	stream grpc.ServerStreamingServer[coordpb.SaveSnapshotChunk]
	sum    hash.Hash
	n      uint64
}

func (w *backupWriter) Write(p []byte) (int, error) {
	const max = 256 << 10
	for off := 0; off < len(p); off += max {
		end := min(off+max, len(p))
		chunk := append([]byte(nil), p[off:end]...)
		if err := w.stream.Send(&coordpb.SaveSnapshotChunk{Part: &coordpb.SaveSnapshotChunk_Data{Data: chunk}}); err != nil {
			return off, err
		}
		w.sum.Write(chunk)
		w.n += uint64(len(chunk))
	}
	return len(p), nil
}
