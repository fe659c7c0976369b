package datadir

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// IdentityFile is the name, inside a member's data dir, of the record that
// says which member the data dir belongs to and which cluster it joined.
// It is written (and fsynced) before the member writes any raft state, and
// it outlives a lost raft.db: a data dir with this file but without its raft
// state is refused instead of silently re-entering the cluster with its term
// and vote forgotten (docs/operations.md#replacing-a-member).
const IdentityFile = "identity.json"

// Identity is the durable identity of a member's data dir.
type Identity struct {
	Format int `json:"format"`
	// MemberID is the --id this data dir was created with.
	MemberID string `json:"member_id"`
	// Incarnation is random, chosen once when the data dir is created. The
	// cluster ID of a bootstrapped cluster is derived from the incarnations
	// of its founding members, so a member that lost its data dir (and so
	// its incarnation) can never re-derive it.
	Incarnation string `json:"incarnation"`
	// ClusterID is empty until the member has bootstrapped or joined.
	ClusterID string `json:"cluster_id,omitempty"`
}

const identityFormat = 1

// identityStore guards the identity of a running member.
type identityStore struct {
	dir string
	mu  sync.Mutex
	id  Identity
}

// newIncarnation returns 16 random bytes in hex.
func newIncarnation() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random incarnation: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// loadIdentity reads dir's identity record. ok is false when there is none.
// A record that cannot be read or parsed is damage.
func loadIdentity(dir string) (id Identity, ok bool, err error) {
	path := filepath.Join(dir, IdentityFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, &id); err != nil {
		return Identity{}, false, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s is not valid: %v", IdentityFile, err)}
	}
	if id.Format != identityFormat || id.MemberID == "" || id.Incarnation == "" {
		return Identity{}, false, &DamagedError{Dir: dir, Reason: fmt.Sprintf("%s is incomplete (format %d, member %q, incarnation %q)",
			IdentityFile, id.Format, id.MemberID, id.Incarnation)}
	}
	return id, true, nil
}

// saveIdentity replaces dir's identity record atomically and durably: the
// new content is fsynced, renamed over the old file, and the directory is
// fsynced so the rename survives a crash.
func saveIdentity(dir string, id Identity) error {
	id.Format = identityFormat
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return fmt.Errorf("encode identity: %w", err)
	}
	return writeFileDurably(dir, IdentityFile, append(data, '\n'))
}

// writeFileDurably replaces dir/name with data atomically and durably: the
// new content is fsynced under a temporary name, renamed over the old file,
// and the directory is fsynced so the rename survives a crash.
func writeFileDurably(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("install %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

func (s *identityStore) get() Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// setClusterID records the cluster this member belongs to. Changing an
// already recorded cluster ID is refused.
func (s *identityStore) setClusterID(clusterID string) error {
	if clusterID == "" {
		return errors.New("empty cluster ID")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.id.ClusterID == clusterID {
		return nil
	}
	if s.id.ClusterID != "" {
		return fmt.Errorf("data dir %s belongs to cluster %s, not %s", s.dir, s.id.ClusterID, clusterID)
	}
	next := s.id
	next.ClusterID = clusterID
	if err := saveIdentity(s.dir, next); err != nil {
		return err
	}
	s.id = next
	return nil
}

// ReadIdentity reads dir's identity record; ok is false when there is none
// (a new data dir, or not a member's). It creates nothing.
func ReadIdentity(dir string) (id Identity, ok bool, err error) { return loadIdentity(dir) }
