package objectstore

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// listDir lists a directory store's objects under prefix, tolerating files
// that vanish during the walk (a writer's temporary renamed or removed, an
// object deleted) and leaving writers' temporaries out. ok is false when
// the walk met a name fileblob stores escaped (or the prefix is not a
// plain key prefix): the caller then lists through fileblob, which knows
// its escaping.
func (s *bucket) listDir(ctx context.Context, prefix string) (out []ObjectInfo, ok bool, err error) {
	if strings.Contains(prefix, "..") || strings.Contains(prefix, "//") || strings.HasPrefix(prefix, "/") || strings.Contains(prefix, "\\") {
		return nil, false, nil
	}
	root := s.dir
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		root = filepath.Join(s.dir, filepath.FromSlash(prefix[:i]))
	}
	escaped := false
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, werr error) error {
		if werr != nil {
			return nil // unreadable or vanished: skipped, as fileblob does
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == s.dir {
			return nil
		}
		rel, rerr := filepath.Rel(s.dir, p)
		if rerr != nil {
			return rerr
		}
		key := filepath.ToSlash(rel)
		if strings.Contains(key, "__0x") {
			escaped = true
			return filepath.SkipAll
		}
		if d.IsDir() {
			if dk := key + "/"; len(dk) > len(prefix) && !strings.HasPrefix(dk, prefix) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, prefix) || strings.HasSuffix(key, ".attrs") || isWriterTemp(key) {
			return nil
		}
		fi, ierr := d.Info()
		if errors.Is(ierr, fs.ErrNotExist) {
			return nil // gone since the directory was read
		}
		if ierr != nil {
			return ierr
		}
		out = append(out, ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()})
		return nil
	})
	if escaped {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, s.wrap("list", prefix+"*", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, true, nil
}
