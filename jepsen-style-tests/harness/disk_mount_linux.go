//go:build linux

package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// mountDisks mounts one tmpfs per member and points the data dirs there;
// the error says why not (the caller keeps the ordinary disk).
func (c *Cluster) mountDisks(size int64) error {
	var mounted []string
	for i := range c.members {
		mnt := filepath.Join(c.cfg.Dir, c.members[i].ID+"-disk")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return errors.Join(err, unmountAll(mounted))
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
			return errors.Join(fmt.Errorf("mount a tmpfs at %s: %w", mnt, err), unmountAll(mounted))
		}
		mounted = append(mounted, mnt)
	}
	c.disks = mounted
	for i := range c.members {
		c.members[i].DataDir = filepath.Join(c.disks[i], "data")
	}
	return nil
}

func unmountAll(mnts []string) error {
	var errs []error
	for _, m := range mnts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
		}
	}
	return errors.Join(errs...)
}
