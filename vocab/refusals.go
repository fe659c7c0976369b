package vocab

import (
	"fmt"
	"regexp"
	"strconv"
)

// StaleManifestMessage is the text of a stale-manifest refusal; clients
// recover the versions with ParseStaleManifest, so the text is part of the
// public API.
func StaleManifestMessage(segment, expected, current int64, why string) string {
	return fmt.Sprintf("stale segment manifest: segment %d expected version %d, current version %d (%s)", segment, expected, current, why)
}

var staleRE = regexp.MustCompile(`stale segment manifest: segment (\d+) expected version (-?\d+), current version (-?\d+)`)

// ParseStaleManifest recovers (segment, expected, current) from a message
// made by StaleManifestMessage.
func ParseStaleManifest(msg string) (segment, expected, current int64, ok bool) {
	m := staleRE.FindStringSubmatch(msg)
	if m == nil {
		return 0, 0, 0, false
	}
	segment, _ = strconv.ParseInt(m[1], 10, 64)
	expected, _ = strconv.ParseInt(m[2], 10, 64)
	current, _ = strconv.ParseInt(m[3], 10, 64)
	return segment, expected, current, true
}
