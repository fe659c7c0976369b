//go:build linux

package objectstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// errNoTmpfile: unnamed temporary files cannot be used here (the kernel
// or the file system lacks O_TMPFILE, or /proc is not mounted to link one
// through); the caller writes a named temporary file instead.
var errNoTmpfile = errors.New("objectstore: O_TMPFILE unavailable")

// linkTmpfile is createFile's Linux path: data goes into an unnamed file
// in dir (O_TMPFILE), which is synced and then linked to final. The name
// appears only once the bytes are durable, and linkat(2) fails when final
// exists (os.ErrExist), so the guarantees are the named temporary file's;
// what it saves is that file's name: no directory entry to add and remove
// and no unlink, several system calls and a share of the kernel's CPU per
// object (bench/RESULTS.md, issue 23, W4). An unnamed file that is never
// linked vanishes on close or in a crash. The caller syncs dir after it.
// fs.ErrNotExist: dir is missing. errNoTmpfile: nothing was created.
func linkTmpfile(dir, final string, data []byte) error {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o600)
	switch {
	case errors.Is(err, unix.EISDIR), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return errNoTmpfile // a kernel before 3.11 answers EISDIR
	case err != nil:
		return &fs.PathError{Op: "open O_TMPFILE", Path: dir, Err: err}
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	proc := "/proc/self/fd/" + strconv.Itoa(fd)
	err = unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, final, unix.AT_SYMLINK_FOLLOW)
	if errors.Is(err, unix.ENOENT) {
		if _, serr := os.Stat(proc); serr != nil {
			return errNoTmpfile // no /proc to name the file by
		}
	}
	if err != nil {
		return &os.LinkError{Op: "link", Old: proc, New: final, Err: err}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", final, err)
	}
	return nil
}
