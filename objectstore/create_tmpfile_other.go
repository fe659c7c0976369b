//go:build !linux

package objectstore

import "errors"

// errNoTmpfile: unnamed temporary files are a Linux feature; elsewhere
// createFile always writes a named temporary file.
var errNoTmpfile = errors.New("objectstore: O_TMPFILE unavailable")

func linkTmpfile(dir, final string, data []byte) error { return errNoTmpfile }
