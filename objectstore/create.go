package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Create is an exclusive create. On S3 it is a conditional PUT
// (If-None-Match), which the server decides atomically. On a directory it
// writes a temporary file in the target's directory (an unnamed one,
// O_TMPFILE, on Linux; a named one beside the target elsewhere), syncs it
// and hard-links it to the final name: link(2) fails when the name
// exists, so of two creators (even in different processes) exactly one
// wins, and the object appears whole. gocloud's own IfNotExist on directories is a check-then-rename
// guarded only within one process, which is why it is not used there.
func (s *bucket) Create(ctx context.Context, key string, data []byte) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if s.dir != "" && plainKey(key) {
		return s.createFile(ctx, key, data)
	}
	err := s.b.Upload(ctx, key, bytes.NewReader(data), &blob.WriterOptions{ContentType: "application/octet-stream", IfNotExist: true})
	if gcerrors.Code(err) == gcerrors.FailedPrecondition {
		return fmt.Errorf("%w: %s in %s", ErrExists, key, s.url)
	}
	if err != nil {
		return s.wrap("create", key, err)
	}
	return nil
}

// plainKey: the key maps to the same relative path in fileblob (letters,
// digits and . _ - / only), so a file created directly is the object.
func plainKey(key string) bool {
	for _, c := range key {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/'
		if !ok {
			return false
		}
	}
	return true
}

// createTempPrefix starts the names of createFile's temporary files.
const createTempPrefix = ".create-"

func (s *bucket) createFile(ctx context.Context, key string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	final := filepath.Join(s.dir, filepath.FromSlash(key))
	if !s.noTmpfile.Load() {
		err := s.createUnnamed(final, data)
		if !errors.Is(err, errNoTmpfile) {
			return s.createResult(key, err)
		}
		s.noTmpfile.Store(true) // it will not start working later
	}
	return s.createResult(key, s.createNamed(final, data))
}

// createUnnamed writes final through an unnamed temporary file
// (linkTmpfile), making its directory first when it is missing: the
// common case, a directory that exists, costs no stat.
func (s *bucket) createUnnamed(final string, data []byte) error {
	dir := filepath.Dir(final)
	err := linkTmpfile(dir, final, data)
	if errors.Is(err, fs.ErrNotExist) {
		if err := s.mkdirDurable(dir); err != nil {
			return err
		}
		err = linkTmpfile(dir, final, data)
	}
	if err != nil {
		return err
	}
	return s.syncNewEntry(dir)
}

// createResult maps a create's error to the store's.
func (s *bucket) createResult(key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNoTmpfile):
		return s.wrap("create", key, err) // never returned by createNamed
	case errors.Is(err, os.ErrExist):
		return fmt.Errorf("%w: %s in %s", ErrExists, key, s.url)
	default:
		return s.wrap("create", key, err)
	}
}

// createNamed writes final through a named temporary file beside it,
// hard-linked to final (where O_TMPFILE is not available).
func (s *bucket) createNamed(final string, data []byte) error {
	if err := s.mkdirDurable(filepath.Dir(final)); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), createTempPrefix+"*.tmp")
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
	if err := os.Link(tmp.Name(), final); err != nil {
		return err
	}
	return s.syncNewEntry(filepath.Dir(final))
}

// syncNewEntry syncs dir after an object's name was linked into it. The
// new name is a directory entry, which the file's own fsync does not
// cover: it must be durable before the caller learns the object exists
// (it commits a pointer to it next), or a machine crash could keep the
// pointer and lose the object.
func (s *bucket) syncNewEntry(dir string) error { return s.sync(dir) }

// mkdirDurable creates dir and any missing parents below the store's root,
// syncing each new directory's parent so the new entries survive a crash
// as the objects created in them will.
func (s *bucket) mkdirDurable(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	var missing []string // deepest first
	for d := dir; d != s.dir && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := s.sync(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

func (s *bucket) sync(dir string) error {
	if s.syncDir != nil {
		return s.syncDir(dir)
	}
	return fsyncDir(dir)
}

// fsyncDir fsyncs a directory, making the entries created in it durable.
func fsyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
