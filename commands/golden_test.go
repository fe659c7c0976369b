package commands

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coordd/coordd/commands/logpb"
)

var update = flag.Bool("update", false, "rewrite commands/testdata/golden/*.hex from the current encoder")

const goldenDir = "testdata/golden"

func goldenPath(typ Type) string { return filepath.Join(goldenDir, typ.String()+".hex") }

// readGolden returns the decoded bytes of one golden file.
func readGolden(tb testing.TB, path string) []byte {
	tb.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("read golden file: %v (run `go test -tags hashicorpmetrics ./commands -run TestGolden -update` to create it)", err)
	}
	data, err := hex.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		tb.Fatalf("golden file %s is not hex: %v", path, err)
	}
	return data
}

// TestGolden is the log compatibility check: the encoding of a fixed command
// of every registered type is pinned in testdata/golden. A change here means
// binaries of different versions would write different log bytes for the
// same command, so it needs a deliberate -update and a compatibility review.
func TestGolden(t *testing.T) {
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, typ := range registeredTypes() {
		t.Run(typ.String(), func(t *testing.T) {
			c := sampleCommand(t, typ)
			got, err := EncodeEntry([]Command{c})
			if err != nil {
				t.Fatalf("EncodeEntry: %v", err)
			}
			path := goldenPath(typ)
			if *update {
				if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want := readGolden(t, path)
			if !bytes.Equal(got, want) {
				t.Errorf("encoding of %s changed (log compatibility break?)\n got %x\nwant %x", typ, got, want)
			}
			// Old log bytes must still decode to the same command.
			decoded, err := DecodeEntry(want)
			if err != nil {
				t.Fatalf("golden bytes no longer decode: %v", err)
			}
			if d := diffCommands(decoded, []Command{c}); d != "" {
				t.Fatalf("golden bytes decode to a different command: %s", d)
			}
		})
	}
}

// TestGoldenNoOrphans: every golden file belongs to a registered type. A
// golden file without a type means a released type was removed or renamed,
// and old logs holding it would stop replicas.
func TestGoldenNoOrphans(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.hex"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, typ := range registeredTypes() {
		known[goldenPath(typ)] = true
	}
	if len(files) < len(known) && !*update {
		t.Errorf("%d golden files for %d registered types", len(files), len(known))
	}
	for _, f := range files {
		if !known[f] {
			t.Errorf("golden file %s has no registered type", f)
		}
	}
}

// ackBroadcastV1 is the golden AckBroadcast entry of version 1 (before the
// sending session was recorded). Logs written then must still apply.
const ackBroadcastV1 = "0a880108820410011a107265712d41636b42726f6164636173742080d095ffbc312807326608dcd9a0d601122c0a1d62792d6465762d726f6f74636f6f72642d646d6c5f305f76636368616e100318920820c0e2bcf48e956612300a2262792d6465762d726f6f74636f6f72642d646d6c5f315f34343933323632313176301001180720c1e2bcf48e9566"

func TestAckBroadcastV1StillDecodes(t *testing.T) {
	data, err := hex.DecodeString(ackBroadcastV1)
	if err != nil {
		t.Fatal(err)
	}
	cmds, err := DecodeEntry(data)
	if err != nil {
		t.Fatalf("a version-1 AckBroadcast no longer decodes: %v", err)
	}
	b, ok := cmds[0].Body.(*logpb.AckBroadcast)
	if !ok || cmds[0].Version != 1 || b.BroadcastId != 449326300 || len(b.Checkpoints) != 2 || b.FromNode != 0 || b.FromEpoch != 0 {
		t.Fatalf("decoded %+v (body %v): want version 1, broadcast 449326300, two checkpoints, no sender", cmds[0], b)
	}
}
