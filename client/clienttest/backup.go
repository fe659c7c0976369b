package clienttest

import (
	"crypto/sha256"
	"slices"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/api/coordpb"
)

// Backup position the fake reports with its snapshot bytes.
const (
	BackupClusterID = "fakecluster"
	BackupIndex     = uint64(4242)
	BackupTerm      = uint64(7)
)

// SaveSnapshot implements coordpb.BackupServer: the meta, the snapshot
// bytes (SetSnapshot) in small chunks, then their size and SHA-256. With
// SetBackupDamage the end marker lies about the checksum.
func (n *Node) SaveSnapshot(_ *coordpb.SaveSnapshotRequest, ss grpc.ServerStreamingServer[coordpb.SaveSnapshotChunk]) error {
	n.c.mu.Lock()
	data, lie, leader := slices.Clone(n.c.snapshot), n.c.backupLie, n.c.leader
	n.c.mu.Unlock()
	leaderID := ""
	if leader >= 0 {
		leaderID = n.c.Nodes[leader].ID
	}
	meta := &coordpb.BackupMeta{ClusterId: BackupClusterID, Index: BackupIndex, Term: BackupTerm, LeaderId: leaderID}
	if err := ss.Send(&coordpb.SaveSnapshotChunk{Part: &coordpb.SaveSnapshotChunk_Meta{Meta: meta}}); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	size := uint64(len(data))
	for len(data) > 0 {
		k := min(snapshotChunkSz, len(data))
		if err := ss.Send(&coordpb.SaveSnapshotChunk{Part: &coordpb.SaveSnapshotChunk_Data{Data: data[:k]}}); err != nil {
			return err
		}
		data = data[k:]
	}
	if lie {
		sum[0] ^= 0xff
	}
	return ss.Send(&coordpb.SaveSnapshotChunk{Part: &coordpb.SaveSnapshotChunk_End{End: &coordpb.BackupEnd{Size: size, Sha256: sum[:]}}})
}

// SetBackupDamage makes SaveSnapshot's end marker carry a wrong checksum
// (a stream damaged in transit).
func (c *Cluster) SetBackupDamage(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.backupLie = on
}
