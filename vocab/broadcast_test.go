package vocab

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// ---- scoped idempotency keys ----------------------------------------------------------

func TestScopedKeyConstructors(t *testing.T) {
	k256 := strings.Repeat("~", MaxIdempotencyKeyBytes)
	k257 := strings.Repeat("~", MaxIdempotencyKeyBytes+1)
	tests := []struct {
		name    string
		build   func() (string, error)
		want    string
		wantErr string
	}{
		{"cluster", func() (string, error) { return ClusterScopedKey("import-42") }, "cluster/0/9:import-42", ""},
		{"database", func() (string, error) { return DatabaseScopedKey(3, "k") }, "db/3/1:k", ""},
		{"collection", func() (string, error) { return CollectionScopedKey(449326211, "a:b/c") }, "coll/449326211/5:a:b/c", ""},
		{"space and tilde are printable", func() (string, error) { return ClusterScopedKey(" ~") }, "cluster/0/2: ~", ""},
		{"256-byte key accepted", func() (string, error) { return DatabaseScopedKey(1, k256) }, "db/1/256:" + k256, ""},
		{"257-byte key rejected", func() (string, error) { return DatabaseScopedKey(1, k257) }, "", "idempotency key must be 1..256 bytes, got 257"},
		{"257-byte cluster key rejected", func() (string, error) { return ClusterScopedKey(k257) }, "", "got 257"},
		{"257-byte collection key rejected", func() (string, error) { return CollectionScopedKey(1, k257) }, "", "got 257"},
		{"empty key", func() (string, error) { return ClusterScopedKey("") }, "", "got 0"},
		{"tab", func() (string, error) { return CollectionScopedKey(1, "a\tb") }, "", "byte 1 (0x09) is not printable ASCII"},
		{"DEL", func() (string, error) { return CollectionScopedKey(1, "\x7f") }, "", "(0x7f) is not printable ASCII"},
		{"UTF-8", func() (string, error) { return CollectionScopedKey(1, "ü") }, "", "not printable ASCII"},
		{"database id 0", func() (string, error) { return DatabaseScopedKey(0, "k") }, "", "database id must be positive, got 0"},
		{"negative database id", func() (string, error) { return DatabaseScopedKey(-4, "k") }, "", "got -4"},
		{"collection id 0", func() (string, error) { return CollectionScopedKey(0, "k") }, "", "collection id must be positive, got 0"},
		{"negative collection id", func() (string, error) { return CollectionScopedKey(-1, "k") }, "", "got -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.build()
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %q, %v; want ErrInvalid containing %q", got, err, tt.wantErr)
				}
				if got != "" {
					t.Fatalf("returned key %q with an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			}
			if err := ValidateScopedKey(got); err != nil {
				t.Fatalf("a constructed key does not validate: %v", err)
			}
		})
	}
}

// scopedKeyInput is one call of a scoped-key constructor.
type scopedKeyInput struct {
	scope string // "cluster", "db", "coll"
	id    int64
	key   string
}

func (in scopedKeyInput) build() (string, error) {
	switch in.scope {
	case "cluster":
		return ClusterScopedKey(in.key)
	case "db":
		return DatabaseScopedKey(in.id, in.key)
	default:
		return CollectionScopedKey(in.id, in.key)
	}
}

// genScopedKeyInput draws constructor arguments from small alphabets rich in
// the encoding's separators and digits, so near-collisions are common.
func genScopedKeyInput(t *rapid.T, label string) scopedKeyInput {
	in := scopedKeyInput{scope: rapid.SampledFrom([]string{"cluster", "db", "coll"}).Draw(t, label+".scope")}
	if in.scope != "cluster" {
		in.id = rapid.OneOf(rapid.Int64Range(1, 130), rapid.Int64Range(1, 1<<62)).Draw(t, label+".id")
	}
	in.key = rapid.StringOfN(rapid.RuneFrom([]rune("1:/0ab9v_")), 1, 12, -1).Draw(t, label+".key")
	return in
}

// TestScopedKeysInjective: different (scope, id, key) never encode to the
// same string, every encoding validates, and the encoding of one scope
// never passes for another.
func TestScopedKeysInjective(t *testing.T) {
	// Hand-picked pairs that a naive "scope/id/key" or "scope:id:key"
	// encoding would confuse.
	pairs := [][2]scopedKeyInput{
		{{"db", 1, "1/a"}, {"db", 11, "a"}},
		{{"db", 1, "2:ab"}, {"db", 1, "ab"}},
		{{"coll", 12, "3:abc"}, {"coll", 1, "2/3:abc"}},
		{{"cluster", 0, "a"}, {"db", 1, "a"}},
		{{"db", 5, "k"}, {"coll", 5, "k"}},
		{{"db", 1, "1:a"}, {"db", 1, "a"}},
	}
	for _, p := range pairs {
		a, errA := p[0].build()
		b, errB := p[1].build()
		if errA != nil || errB != nil {
			t.Fatalf("%v / %v: %v, %v", p[0], p[1], errA, errB)
		}
		if a == b {
			t.Errorf("%v and %v both encode to %q", p[0], p[1], a)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		x := genScopedKeyInput(t, "x")
		y := genScopedKeyInput(t, "y")
		ex, err := x.build()
		if err != nil {
			t.Fatalf("%v: %v", x, err)
		}
		ey, err := y.build()
		if err != nil {
			t.Fatalf("%v: %v", y, err)
		}
		if (ex == ey) != (x == y) {
			t.Fatalf("%+v -> %q, %+v -> %q", x, ex, y, ey)
		}
		if err := ValidateScopedKey(ex); err != nil {
			t.Fatalf("constructed key %q does not validate: %v", ex, err)
		}
		if err := ValidateBroadcast(Broadcast{MessageType: MsgFlushAll, VChannels: []string{"p_1"}, IdempotencyKey: ex}); err != nil {
			t.Fatalf("broadcast with key %q: %v", ex, err)
		}
		// The dedup scope embeds the message type; that composition must be
		// injective too (a message type cannot contain the separator).
		if !strings.HasPrefix(ex, x.scope+"/") || !strings.HasSuffix(ex, ":"+x.key) {
			t.Fatalf("encoding %q does not carry its scope and key", ex)
		}
	})
}

// TestValidateScopedKeyAcceptsOnlyConstructorOutput: any string the
// validator accepts is exactly what a constructor produces for the fields
// it spells.
func TestValidateScopedKeyAcceptsOnlyConstructorOutput(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.StringOfN(rapid.RuneFrom([]rune("cluster/dbo0123:+-a\x01")), 0, 24, -1).Draw(t, "s")
		if rapid.Bool().Draw(t, "prefixed") {
			s = rapid.SampledFrom([]string{"cluster/", "db/", "coll/"}).Draw(t, "scope") + s
		}
		if ValidateScopedKey(s) != nil {
			return
		}
		scope, rest, _ := strings.Cut(s, "/")
		id, rest, _ := strings.Cut(rest, "/")
		_, key, _ := strings.Cut(rest, ":")
		idv, _ := strconv.ParseInt(id, 10, 64)
		got, err := scopedKeyInput{scope, idv, key}.build()
		if err != nil || got != s {
			t.Fatalf("validator accepted %q, but the constructor gives %q, %v", s, got, err)
		}
	})
}

// ---- resource keys --------------------------------------------------------------------
