package buildinfo

import (
	"strings"
	"testing"

	"github.com/coordd/coordd/commands"
)

func TestTextNamesProgramGoAndLogFormat(t *testing.T) {
	got := Text("coordd")
	for _, want := range []string{"coordd ", "go:", "log format: " + commands.LogFormat()} {
		if !strings.Contains(got, want) {
			t.Fatalf("version text lacks %q:\n%s", want, got)
		}
	}
}
