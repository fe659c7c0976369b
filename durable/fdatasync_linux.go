//go:build linux

package durable

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data and the metadata needed to read it back (its
// size), skipping timestamps; it retries an interrupted call.
func Fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
