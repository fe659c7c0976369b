//go:build !linux

package durable

import "os"

// Fdatasync is a full fsync where the system has no fdatasync.
func Fdatasync(f *os.File) error { return f.Sync() }
