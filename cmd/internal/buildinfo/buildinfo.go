// Package buildinfo is the version text of coordd's binaries: the module
// version and VCS stamp Go records in the binary (runtime/debug), the build
// time the Makefile stamps (-ldflags -X), and the replicated log format
// (commands.LogFormat), so `coordd --version`, `streamingnode --version`
// and `coordctl version` answer "what is this, from which commit, and can
// it read that log".
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/coordd/coordd/commands"
)

// builtAt is when the binary was built, RFC 3339 in UTC, set by the
// Makefile's -ldflags "-X github.com/coordd/coordd/cmd/internal/buildinfo.builtAt=...";
// empty for a plain `go build`.
var builtAt string

// Info is what a binary knows about its own build.
type Info struct {
	Program string `json:"program"`
	// Version is the main module's version: a pseudo-version from the
	// commit when Go stamped VCS information, "(devel)" when it did not.
	Version string `json:"version"`
	Go      string `json:"go"`
	// Commit and CommitTime are the VCS stamp (go build -buildvcs);
	// Modified: the working tree had uncommitted changes.
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time"`
	Modified   bool   `json:"modified"`
	// BuiltAt is the Makefile's stamp (empty: not built by make).
	BuiltAt   string `json:"built_at"`
	BuildTags string `json:"build_tags"`
	LogFormat string `json:"log_format"`
}

// Read is program's build information.
func Read(program string) Info {
	in := Info{Program: program, Version: "(unknown)", Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		BuiltAt: builtAt, LogFormat: commands.LogFormat()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		in.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				in.Commit = s.Value
			case "vcs.time":
				in.CommitTime = s.Value
			case "vcs.modified":
				in.Modified = s.Value == "true"
			case "-tags":
				in.BuildTags = s.Value
			}
		}
	}
	return in
}

// Text is the multi-line version text of program.
func Text(program string) string { return Read(program).Text() }

// Text is the multi-line version text. The commit line is always there:
// a binary without a VCS stamp says so and how to get one.
func (in Info) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", in.Program, in.Version)
	fmt.Fprintf(&b, "  go:         %s\n", in.Go)
	if in.Commit != "" {
		mod := ""
		if in.Modified {
			mod = " (modified)"
		}
		fmt.Fprintf(&b, "  commit:     %s%s, committed %s\n", in.Commit, mod, in.CommitTime)
	} else {
		b.WriteString("  commit:     unknown (built without VCS stamping: build with 'make build', or go build -buildvcs=true in a git checkout)\n")
	}
	if in.BuiltAt != "" {
		fmt.Fprintf(&b, "  built:      %s\n", in.BuiltAt)
	} else {
		b.WriteString("  built:      unknown (not built by 'make build')\n")
	}
	if in.BuildTags != "" {
		fmt.Fprintf(&b, "  build tags: %s\n", in.BuildTags)
	}
	fmt.Fprintf(&b, "  log format: %s\n", in.LogFormat)
	return b.String()
}
