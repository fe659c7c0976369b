package objectstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
)

// Create is an exclusive create. On S3 it is a conditional PUT
// (If-None-Match), which the server decides atomically. On a directory it
// writes a temporary file beside the target, syncs it and hard-links it to
// the final name: link(2) fails when the name exists, so of two creators
// (even in different processes) exactly one wins, and the object appears
// whole. gocloud's own IfNotExist on directories is a check-then-rename
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
	if err := s.mkdirDurable(filepath.Dir(final)); err != nil {
		return s.wrap("create", key, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(final), createTempPrefix+"*.tmp")
	if err != nil {
		return s.wrap("create", key, err)
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
		return s.wrap("create", key, werr)
	}
	if err := os.Link(tmp.Name(), final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s in %s", ErrExists, key, s.url)
		}
		return s.wrap("create", key, err)
	}
	// The new name is a directory entry, which the file's own fsync does
	// not cover: sync the directory before the caller learns the object
	// exists (it commits a pointer to it next), or a machine crash could
	// keep the pointer and lose the object.
	if err := s.sync(filepath.Dir(final)); err != nil {
		return s.wrap("create", key, err)
	}
	return nil
}

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
