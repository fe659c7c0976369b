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
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
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
	return nil
}
