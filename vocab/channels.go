package vocab

import (
	"strconv"
	"strings"
)

// Channel naming (docs/semantics.md#channel-naming):
//   - PChannel: <prefix>_<index>, e.g. by-dev-rootcoord-dml_0
//   - VChannel: <pchannel>_<collectionID>v<shard>, e.g. by-dev-rootcoord-dml_0_12345v0
//   - CChannel: <pchannel>_vcchan
const (
	MaxChannelNameBytes = 200
	MaxPChannelsPerCmd  = 4096
	MaxVChannelsPerColl = 1024
	CChannelSuffix      = "_vcchan"
)

// PChannelName builds <prefix>_<index>.
func PChannelName(prefix string, index int) string { return prefix + "_" + strconv.Itoa(index) }

// VChannelName builds <pchannel>_<collectionID>v<shard>.
func VChannelName(pchannel string, collectionID int64, shard int) string {
	return pchannel + "_" + strconv.FormatInt(collectionID, 10) + "v" + strconv.Itoa(shard)
}

// CChannelName is the control channel bound to pchannel.
func CChannelName(pchannel string) string { return pchannel + CChannelSuffix }

// IsCChannel reports whether name is a control channel.
func IsCChannel(name string) bool { return strings.HasSuffix(name, "vcchan") }

// PChannelOf maps a channel name to its PChannel: a VChannel or CChannel
// maps to the name up to its last '_'; a PChannel name (whose last segment
// is a decimal index) maps to itself, so cluster-level messages can target
// PChannels directly.
func PChannelOf(name string) string {
	i := strings.LastIndexByte(name, '_')
	if i <= 0 {
		return name
	}
	if last := name[i+1:]; last != "" && strings.Trim(last, "0123456789") == "" {
		return name
	}
	return name[:i]
}

// ValidatePrefix checks a PChannel name prefix: 1..128 bytes of
// [A-Za-z0-9_-], not ending in '_'.
func ValidatePrefix(prefix string) error {
	if prefix == "" || len(prefix) > 128 {
		return invalid("pchannel prefix must be 1..128 bytes, got %d", len(prefix))
	}
	if prefix[len(prefix)-1] == '_' {
		return invalid("pchannel prefix %q must not end with '_'", prefix)
	}
	for i := 0; i < len(prefix); i++ {
		if !nameChar(prefix[i]) {
			return invalid("pchannel prefix %q: character %q not allowed (letters, digits, '_', '-')", prefix, prefix[i])
		}
	}
	return nil
}

// ValidatePChannelName checks <prefix>_<index> with a decimal index.
func ValidatePChannelName(name string) error {
	i := strings.LastIndexByte(name, '_')
	if i <= 0 || i == len(name)-1 || len(name) > MaxChannelNameBytes {
		return invalid("pchannel name %q: want <prefix>_<index>", name)
	}
	if err := ValidatePrefix(name[:i]); err != nil {
		return invalid("pchannel name %q: bad prefix", name)
	}
	idx := name[i+1:]
	if len(idx) > 1 && idx[0] == '0' {
		return invalid("pchannel name %q: index has a leading zero", name)
	}
	if _, err := strconv.ParseUint(idx, 10, 31); err != nil {
		return invalid("pchannel name %q: index %q is not a small non-negative integer", name, idx)
	}
	return nil
}

// ValidateVChannelName checks <pchannel>_<collectionID>v<shard> or a
// CChannel name.
func ValidateVChannelName(name string) error {
	if IsCChannel(name) {
		if !strings.HasSuffix(name, CChannelSuffix) {
			return invalid("vchannel name %q: bad control channel name", name)
		}
		return ValidatePChannelName(strings.TrimSuffix(name, CChannelSuffix))
	}
	i := strings.LastIndexByte(name, '_')
	if err := ValidatePChannelName(name[:max(i, 0)]); i <= 0 || err != nil {
		return invalid("vchannel name %q: bad pchannel part", name)
	}
	rest := name[i+1:]
	coll, shard, ok := strings.Cut(rest, "v")
	if !ok {
		return invalid("vchannel name %q: want <pchannel>_<collectionID>v<shard>", name)
	}
	// Only the canonical spelling VChannelName produces is accepted: a
	// positive collection ID and a shard index without signs or leading
	// zeros, so one vchannel has exactly one name.
	// The canonical spellings are built in a stack buffer: validation runs
	// for every checkpoint a leader proposes and a replica applies.
	var buf [20]byte
	if id, err := strconv.ParseInt(coll, 10, 64); err != nil || id <= 0 || string(strconv.AppendInt(buf[:0], id, 10)) != coll {
		return invalid("vchannel name %q: bad collection id", name)
	}
	if sh, err := strconv.ParseUint(shard, 10, 16); err != nil || string(strconv.AppendUint(buf[:0], sh, 10)) != shard {
		return invalid("vchannel name %q: bad shard index", name)
	}
	return nil
}

// CollectionOfVChannel parses the collection ID out of a VChannel name
// (<pchannel>_<collectionID>v<shard>).
func CollectionOfVChannel(name string) (int64, bool) {
	if ValidateVChannelName(name) != nil || IsCChannel(name) {
		return 0, false
	}
	rest := name[strings.LastIndexByte(name, '_')+1:]
	coll, _, _ := strings.Cut(rest, "v")
	id, err := strconv.ParseInt(coll, 10, 64)
	return id, err == nil
}

// ValidateClusterID checks a cluster ID: 1..64 bytes of [A-Za-z0-9_-].
func ValidateClusterID(id string) error {
	if id == "" || len(id) > 64 {
		return invalid("cluster id must be 1..64 bytes, got %d", len(id))
	}
	for i := 0; i < len(id); i++ {
		if !nameChar(id[i]) {
			return invalid("cluster id %q: character %q not allowed", id, id[i])
		}
	}
	return nil
}

func nameChar(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-'
}
