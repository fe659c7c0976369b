package vocab

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// FormatBytes writes a byte count in binary units ("1.5 GiB", "512 B"),
// as the memory guard's messages and the status page show sizes.
func FormatBytes(b int64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := int64(unit), 0
	for v := b / unit; v >= unit && exp < 5; v /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// byteUnits are the suffixes ParseBytes accepts: binary (KiB, MiB, ...)
// and decimal (KB, MB, ...), as plain bytes (B or none).
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseBytes reads a non-negative byte count: a whole number with an
// optional unit (512MiB, 2GiB, 1500000000, 4GB). Anything else is an
// ErrInvalid naming the accepted forms.
func ParseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, invalid("byte count %q: want a whole number of bytes, optionally with a unit (KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 512MiB", s)
	}
	return n * mult, nil
}
