package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Members on file systems of their own (Config.DiskPerMember): each
// member's data dir is <Dir>/<id>-disk/data on a tmpfs of that size, so the
// disk-full nemesis can fill one member's disk to the last byte and free
// it again without touching the others or the machine. Mounting needs root
// with mount rights (CI has them); where it is refused, the members run on
// the ordinary disk and HasDisks says so, so the fault is skipped with a
// message rather than failing the run.

// fillerName is the file that fills a member's disk.
const fillerName = "filler"

// HasDisks says whether every member has a file system of its own.
func (c *Cluster) HasDisks() bool { return len(c.disks) == len(c.members) }

// FillDisk writes a file onto member i's file system until not one byte
// more fits, and says how much it wrote.
func (c *Cluster) FillDisk(i int) (string, error) {
	if !c.HasDisks() {
		return "", errors.New("the members have no file systems of their own")
	}
	f, err := os.OpenFile(filepath.Join(c.disks[i], fillerName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		buf := make([]byte, chunk)
		for {
			k, err := f.Write(buf)
			n += int64(k)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return "", err
			}
		}
	}
	return fmt.Sprintf("%s's disk filled (%d bytes written, 0 free)", c.members[i].ID, n), nil
}

// FreeDisk removes what FillDisk wrote on member i's file system.
func (c *Cluster) FreeDisk(i int) error {
	if !c.HasDisks() {
		return nil
	}
	err := os.Remove(filepath.Join(c.disks[i], fillerName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
