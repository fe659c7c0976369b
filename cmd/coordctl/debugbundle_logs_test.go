package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --logs takes the tail of every *.log under the directory, and nothing else.
func TestCollectLogs(t *testing.T) {
	dir := t.TempDir()
	big := bytes.Repeat([]byte("x"), logTailBytes+100)
	big = append(big, []byte("the end\n")...)
	for name, data := range map[string][]byte{
		"n1/coordd.log":         []byte("member log\n"),
		"sn1/streamingnode.log": big,
		"n1/raft.db":            []byte("not a log"),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := &bundle{now: time.Now()}
	collectLogs(b, dir)
	got := map[string]string{}
	for _, f := range b.files {
		got[f.name] = string(f.data)
	}
	if len(got) != 2 || got["logs/n1/coordd.log"] != "member log\n" {
		t.Fatalf("files %v", keys(got))
	}
	sn := got["logs/sn1/streamingnode.log"]
	if len(sn) != logTailBytes || !strings.HasSuffix(sn, "the end\n") {
		t.Fatalf("streaming node log: %d bytes, want the last %d", len(sn), logTailBytes)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
