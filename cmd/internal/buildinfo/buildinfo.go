// Package buildinfo is the version text of coordd's binaries: the module
// version and VCS stamp Go records in the binary (runtime/debug), and the
// replicated log format (commands.LogFormat), so `coordd --version` and
// `coordctl version` answer "what is this and can it read that log".
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/coordd/coordd/commands"
)

// Text is the multi-line version text of program.
func Text(program string) string {
	var b strings.Builder
	version, settings := "(unknown)", map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		version = bi.Main.Version
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
	}
	fmt.Fprintf(&b, "%s %s\n", program, version)
	fmt.Fprintf(&b, "  go:         %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if rev := settings["vcs.revision"]; rev != "" {
		mod := ""
		if settings["vcs.modified"] == "true" {
			mod = " (modified)"
		}
		fmt.Fprintf(&b, "  commit:     %s%s %s\n", rev, mod, settings["vcs.time"])
	}
	if tags := settings["-tags"]; tags != "" {
		fmt.Fprintf(&b, "  build tags: %s\n", tags)
	}
	fmt.Fprintf(&b, "  log format: %s\n", commands.LogFormat())
	return b.String()
}
