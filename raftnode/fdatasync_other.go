//go:build !linux

package raftnode

import "os"

func fdatasync(f *os.File) error { return f.Sync() }
