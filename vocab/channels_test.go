package vocab

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

// nameLongest is the longest valid pchannel name: a 128-byte prefix and
// the largest index (the prefix limit binds before MaxChannelNameBytes
// does).
var nameLongest = strings.Repeat("p", 128) + "_2147483647"

// name129 has a prefix one byte too long.
var name129 = strings.Repeat("p", 129) + "_7"

// name201 is over MaxChannelNameBytes.
var name201 = strings.Repeat("p", MaxChannelNameBytes-1) + "_7"

// badPChannelNames are refused by ValidatePChannelName (package commands
// checks that every command carrying a pchannel name refuses them too).
var badPChannelNames = []struct{ name, value string }{
	{"empty", ""},
	{"no index", "x"},
	{"empty index", "p_"},
	{"leading zero", "p_01"},
	{"negative index", "p_-1"},
	{"space in prefix", "a b_1"},
	{"201 bytes", name201},
	{"129-byte prefix", name129},
	{"empty prefix", "_1"},
	{"prefix ends with underscore", "p__1"},
	{"index not a number", "p_x"},
	{"index with plus", "p_+1"},
	{"index over 31 bits", "p_2147483648"},
	{"control channel", "by-dev-rootcoord-dml_0" + CChannelSuffix},
	{"vchannel", "by-dev-rootcoord-dml_0_12v0"},
	{"non-ASCII", "pö_1"},
}

func TestChannelNameBuilders(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"pchannel", PChannelName("by-dev-rootcoord-dml", 0), "by-dev-rootcoord-dml_0"},
		{"pchannel index 15", PChannelName("dml", 15), "dml_15"},
		{"pchannel prefix with underscore", PChannelName("a_b", 3), "a_b_3"},
		{"vchannel", VChannelName("by-dev-rootcoord-dml_0", 12345, 0), "by-dev-rootcoord-dml_0_12345v0"},
		{"vchannel shard 7", VChannelName("dml_3", 449326211, 7), "dml_3_449326211v7"},
		{"vchannel max collection id", VChannelName("dml_3", math.MaxInt64, 1023), "dml_3_9223372036854775807v1023"},
		{"cchannel", CChannelName("by-dev-rootcoord-dml_0"), "by-dev-rootcoord-dml_0_vcchan"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestIsCChannel(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"by-dev-rootcoord-dml_0_vcchan", true},
		{CChannelName("dml_7"), true},
		{"vcchan", true},      // Milvus: a name is the control channel iff it ends with vcchan
		{"dml_0vcchan", true}, // ... even without the '_' (ValidateVChannelName rejects it)
		{"by-dev-rootcoord-dml_0", false},
		{"by-dev-rootcoord-dml_0_12345v0", false},
		{"dml_0_vcchan_1", false},
		{"vcchanx", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := IsCChannel(tt.name); got != tt.want {
			t.Errorf("IsCChannel(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPChannelOf(t *testing.T) {
	tests := []struct {
		name string
		want string
	}{
		{"by-dev-rootcoord-dml_0_12345v0", "by-dev-rootcoord-dml_0"},
		{"by-dev-rootcoord-dml_0_vcchan", "by-dev-rootcoord-dml_0"},
		{"a_b_3_1v2", "a_b_3"},
		{VChannelName("dml_15", 1, 0), "dml_15"},
		{CChannelName("dml_15"), "dml_15"},
		// Degenerate names without a usable '_' map to themselves.
		{"noseparator", "noseparator"},
		{"_leading", "_leading"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := PChannelOf(tt.name); got != tt.want {
			t.Errorf("PChannelOf(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

type nameCase struct {
	in      string
	wantErr string // "" means valid
}

func runNameCases(t *testing.T, fn string, validate func(string) error, tests []nameCase) {
	t.Helper()
	for _, tt := range tests {
		err := validate(tt.in)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("%s(%q) = %v, want nil", fn, tt.in, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s(%q) = nil, want error containing %q", fn, tt.in, tt.wantErr)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s(%q) = %v, want ErrInvalid containing %q", fn, tt.in, err, tt.wantErr)
		}
	}
}

func TestValidatePrefix(t *testing.T) {
	runNameCases(t, "ValidatePrefix", ValidatePrefix, []nameCase{
		{"by-dev-rootcoord-dml", ""},
		{"a", ""},
		{"a_b", ""},
		{"_a", ""},
		{"A-Z_0-9", ""},
		{strings.Repeat("p", 128), ""},
		{"", "pchannel prefix must be 1..128 bytes, got 0"},
		{strings.Repeat("p", 129), "got 129"},
		{"dml_", "must not end with '_'"},
		{"_", "must not end with '_'"},
		{"a b", `character ' ' not allowed`},
		{"a.b", `character '.' not allowed`},
		{"a/b", `character '/' not allowed`},
		{"dmlö", "not allowed"},
	})
}

func TestValidatePChannelName(t *testing.T) {
	tests := []nameCase{
		{"by-dev-rootcoord-dml_0", ""},
		{"by-dev-rootcoord-dml_15", ""},
		{"a_b_3", ""},
		{"p_0", ""},
		{"p_2147483647", ""},
		{nameLongest, ""},
		{"", "want <prefix>_<index>"},
		{"x", "want <prefix>_<index>"},
		{"p_", "want <prefix>_<index>"},
		{"_1", "want <prefix>_<index>"},
		{name201, "want <prefix>_<index>"},
		{name129, "bad prefix"},
		{"a b_1", "bad prefix"},
		{"p__1", "bad prefix"},
		{"p_01", "index has a leading zero"},
		{"p_00", "index has a leading zero"},
		{"p_-1", "is not a small non-negative integer"},
		{"p_+1", "is not a small non-negative integer"},
		{"p_1x", "is not a small non-negative integer"},
		{"p_2147483648", "is not a small non-negative integer"},
		{"p_0_vcchan", "is not a small non-negative integer"},
		{"p_0_12v0", "is not a small non-negative integer"},
	}
	runNameCases(t, "ValidatePChannelName", ValidatePChannelName, tests)
	for _, bad := range badPChannelNames {
		if ValidatePChannelName(bad.value) == nil {
			t.Errorf("ValidatePChannelName(%s) accepted %q", bad.name, bad.value)
		}
	}
}

func TestValidateVChannelName(t *testing.T) {
	runNameCases(t, "ValidateVChannelName", ValidateVChannelName, []nameCase{
		{"by-dev-rootcoord-dml_0_12345v0", ""},
		{"dml_15_449326211v7", ""},
		{"a_b_3_1v2", ""},
		{"dml_0_9223372036854775807v65535", ""},
		{"by-dev-rootcoord-dml_0_vcchan", ""},
		{CChannelName(nameLongest), ""},
		{"", "bad pchannel part"},
		{"dml_0", "bad pchannel part"}, // a pchannel is not a vchannel
		{"dml_01_1v0", "bad pchannel part"},
		{"dml_x_1v0", "bad pchannel part"},
		{"a b_0_1v0", "bad pchannel part"},
		{"dml_0_12345", "want <pchannel>_<collectionID>v<shard>"},
		{"dml_0_v0", "bad collection id"},
		{"dml_0_xv0", "bad collection id"},
		{"dml_0_9223372036854775808v0", "bad collection id"},
		{"dml_0_1v", "bad shard index"},
		{"dml_0_1v-1", "bad shard index"},
		{"dml_0_1v65536", "bad shard index"},
		{"dml_0_1v0v1", "bad shard index"},
		// Only the canonical spelling VChannelName produces is a name.
		{"dml_0_0v0", "bad collection id"},
		{"dml_0_-5v0", "bad collection id"},
		{"dml_0_+5v0", "bad collection id"},
		{"dml_0_05v0", "bad collection id"},
		{"dml_0_5v00", "bad shard index"},
		{"dml_0_5v+0", "bad shard index"},
		// Control channel names.
		{"dml_0vcchan", "bad control channel name"},
		{"vcchan", "bad control channel name"},
		{"_vcchan", "want <prefix>_<index>"},
		{"dml_01_vcchan", "index has a leading zero"},
		{"dml_vcchan", "want <prefix>_<index>"},
	})
}

func TestValidateClusterID(t *testing.T) {
	runNameCases(t, "ValidateClusterID", ValidateClusterID, []nameCase{
		{"by-dev", ""},
		{"c", ""},
		{"A-z_09", ""},
		{strings.Repeat("c", 64), ""},
		{"", "cluster id must be 1..64 bytes, got 0"},
		{strings.Repeat("c", 65), "got 65"},
		{"by dev", `character ' ' not allowed`},
		{"by.dev", `character '.' not allowed`},
		{"by:dev", `character ':' not allowed`},
		{"ü", "not allowed"},
	})
}

func nameByteOK(ch byte) bool {
	return ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-'
}

// FuzzValidateChannelNames: the name helpers never panic, every validator
// error wraps ErrInvalid, names built from valid parts validate and map back
// to their pchannel, and every accepted name is in the canonical form the
// builders produce.
func FuzzValidateChannelNames(f *testing.F) {
	f.Add("by-dev-rootcoord-dml", 0, int64(12345), 0, "by-dev-rootcoord-dml_0_12345v0")
	f.Add("dml", 15, int64(1), 1023, "dml_15_vcchan")
	f.Add("a_b", 3, int64(math.MaxInt64), 65535, "a_b_3")
	f.Add("", -1, int64(0), -1, "")
	f.Add("dml_", 1<<31, int64(-5), 65536, "p_01")
	f.Add("a b", 1, int64(1), 0, "dml_0_+5v0")
	f.Add(strings.Repeat("p", 129), 7, int64(7), 7, name201)
	f.Add("x", 0, int64(1), 0, "dml_0vcchan")
	f.Add("ö", 0, int64(1), 0, "_vcchan")
	f.Fuzz(func(t *testing.T, prefix string, index int, coll int64, shard int, name string) {
		check := func(what string, err error) bool {
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("%s error %v does not wrap ErrInvalid", what, err)
			}
			return err == nil
		}

		// Arbitrary names: no panics, and acceptance implies the contract.
		_ = IsCChannel(name)
		_ = PChannelOf(name)
		if check("ValidatePrefix", ValidatePrefix(name)) {
			if len(name) == 0 || len(name) > 128 || name[len(name)-1] == '_' {
				t.Fatalf("ValidatePrefix accepted %q", name)
			}
			for i := 0; i < len(name); i++ {
				if !nameByteOK(name[i]) {
					t.Fatalf("ValidatePrefix accepted %q with byte %q", name, name[i])
				}
			}
		}
		if check("ValidateClusterID", ValidateClusterID(name)) {
			if len(name) == 0 || len(name) > 64 {
				t.Fatalf("ValidateClusterID accepted %d bytes", len(name))
			}
			for i := 0; i < len(name); i++ {
				if !nameByteOK(name[i]) {
					t.Fatalf("ValidateClusterID accepted %q with byte %q", name, name[i])
				}
			}
		}
		if check("ValidatePChannelName", ValidatePChannelName(name)) {
			i := strings.LastIndexByte(name, '_')
			idx, err := strconv.Atoi(name[i+1:])
			if err != nil || ValidatePrefix(name[:i]) != nil || PChannelName(name[:i], idx) != name {
				t.Fatalf("ValidatePChannelName accepted non-canonical %q", name)
			}
			if len(name) > MaxChannelNameBytes || IsCChannel(name) || ValidateVChannelName(name) == nil {
				t.Fatalf("ValidatePChannelName accepted %q, which is too long or also a vchannel", name)
			}
		}
		if check("ValidateVChannelName", ValidateVChannelName(name)) {
			p := PChannelOf(name)
			if ValidatePChannelName(p) != nil {
				t.Fatalf("ValidateVChannelName accepted %q whose pchannel %q is invalid", name, p)
			}
			if IsCChannel(name) {
				if CChannelName(p) != name {
					t.Fatalf("ValidateVChannelName accepted control channel %q, not %q", name, CChannelName(p))
				}
			} else {
				cs, ss, _ := strings.Cut(name[len(p)+1:], "v")
				c, err1 := strconv.ParseInt(cs, 10, 64)
				s, err2 := strconv.Atoi(ss)
				if err1 != nil || err2 != nil || c <= 0 || VChannelName(p, c, s) != name {
					t.Fatalf("ValidateVChannelName accepted non-canonical %q", name)
				}
			}
		}

		// Names built from parts.
		p := PChannelName(prefix, index)
		prefixOK := check("ValidatePrefix", ValidatePrefix(prefix))
		indexOK := index >= 0 && index <= math.MaxInt32
		if got := check("ValidatePChannelName", ValidatePChannelName(p)); got != (prefixOK && indexOK) {
			t.Fatalf("ValidatePChannelName(%q) ok=%v, but prefix ok=%v index ok=%v", p, got, prefixOK, indexOK)
		}
		if !prefixOK || !indexOK {
			return
		}
		if IsCChannel(p) {
			t.Fatalf("pchannel %q looks like a control channel", p)
		}
		cc := CChannelName(p)
		if !IsCChannel(cc) || PChannelOf(cc) != p || !check("ValidateVChannelName", ValidateVChannelName(cc)) {
			t.Fatalf("control channel %q of %q: IsCChannel %v, PChannelOf %q, valid %v",
				cc, p, IsCChannel(cc), PChannelOf(cc), ValidateVChannelName(cc))
		}
		if ValidatePChannelName(cc) == nil {
			t.Fatalf("control channel %q validates as a pchannel", cc)
		}
		v := VChannelName(p, coll, shard)
		if PChannelOf(v) != p {
			t.Fatalf("PChannelOf(VChannelName(%q, %d, %d)) = %q", p, coll, shard, PChannelOf(v))
		}
		if IsCChannel(v) || ValidatePChannelName(v) == nil {
			t.Fatalf("vchannel %q is taken for a control channel or a pchannel", v)
		}
		wantValid := coll > 0 && shard >= 0 && shard <= math.MaxUint16
		if got := check("ValidateVChannelName", ValidateVChannelName(v)); got != wantValid {
			t.Fatalf("ValidateVChannelName(%q) ok=%v, want %v", v, got, wantValid)
		}
	})
}
