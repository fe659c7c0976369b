package vocab

import (
	"net"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of single requests, shared by the API (fail fast) and the log
// (the real guard).
const (
	// MaxRequestIDBytes bounds a client request ID.
	MaxRequestIDBytes = 128
	// MaxAllocCount bounds one allocator request.
	MaxAllocCount = 1 << 16
	// MaxReasonBytes bounds an operator's or a node's reason text.
	MaxReasonBytes = 1024
	// MaxMemberIDBytes bounds a raft member ID.
	MaxMemberIDBytes = 64
)

// ValidateRequestID is the one check of a client request ID's length.
func ValidateRequestID(id string) error {
	if len(id) > MaxRequestIDBytes {
		return invalid("request_id is %d bytes (max %d)", len(id), MaxRequestIDBytes)
	}
	return nil
}

// ValidateVChannelAlloc checks a request for count VChannels of a
// collection: a positive collection ID and 1..MaxVChannelsPerColl.
func ValidateVChannelAlloc(collectionID int64, count uint32) error {
	if err := ValidateCollectionID(collectionID); err != nil {
		return err
	}
	if count == 0 || count > MaxVChannelsPerColl {
		return invalid("vchannel count must be in 1..%d, got %d", MaxVChannelsPerColl, count)
	}
	return nil
}

// ValidateCollectionID: collection IDs are positive.
func ValidateCollectionID(id int64) error {
	if id <= 0 {
		return invalid("collection id must be positive, got %d", id)
	}
	return nil
}

// ValidateReason: at most MaxReasonBytes bytes (empty is allowed).
func ValidateReason(r string) error {
	if len(r) > MaxReasonBytes {
		return invalid("reason is %d bytes (max %d)", len(r), MaxReasonBytes)
	}
	return nil
}

// TruncateReason makes s a valid UTF-8 reason of at most MaxReasonBytes,
// cut on a character boundary (a proto3 string must be valid UTF-8, or the
// command carrying it cannot be encoded).
func TruncateReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= MaxReasonBytes {
		return s
	}
	cut := MaxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// ValidateMemberID accepts 1..64 bytes of [A-Za-z0-9._-].
func ValidateMemberID(id string) error {
	if id == "" || len(id) > MaxMemberIDBytes {
		return invalid("member id must be 1..%d bytes, got %d", MaxMemberIDBytes, len(id))
	}
	for i := 0; i < len(id); i++ {
		ch := id[i]
		ok := ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '.' || ch == '_' || ch == '-'
		if !ok {
			return invalid("member id %q: character %q not allowed (use letters, digits, '.', '_', '-')", id, ch)
		}
	}
	return nil
}

// ValidateAddr checks a host:port address with a numeric port in 1..65535;
// field names the address in the error.
func ValidateAddr(field, addr string, required bool) error {
	if addr == "" {
		if required {
			return invalid("%s is required", field)
		}
		return nil
	}
	if len(addr) > 255 {
		return invalid("%s is %d bytes (max 255)", field, len(addr))
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid("%s %q: %v", field, addr, err)
	}
	if host == "" {
		return invalid("%s %q: host is empty", field, addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return invalid("%s %q: port must be 1..65535", field, addr)
	}
	return nil
}
