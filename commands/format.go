package commands

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
)

// LogFormat names the replicated log format this binary writes and reads:
// how many command types it knows and a fingerprint of every (type, body
// version) pair. Two binaries with the same fingerprint read each other's
// logs; a new command type or body version changes it. `coordd --version`
// and `coordctl version` print it so an operator can compare members
// before a rolling upgrade.
func LogFormat() string {
	types := make([]Type, 0, len(registry))
	for t := range registry {
		types = append(types, t)
	}
	slices.Sort(types)
	h := sha256.New()
	var buf [8]byte
	for _, t := range types {
		binary.BigEndian.PutUint32(buf[:4], uint32(t))
		binary.BigEndian.PutUint32(buf[4:], registry[t].version)
		h.Write(buf[:])
	}
	return fmt.Sprintf("%d command types, fingerprint %s", len(types), hex.EncodeToString(h.Sum(nil))[:12])
}
