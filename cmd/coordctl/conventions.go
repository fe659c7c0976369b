package main

import (
	"errors"
	"flag"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/coordd/coordd/cmd/internal/buildinfo"
)

// CLI conventions an operator expects from etcdctl/kubectl-like tools:
// `coordctl version`/`--version`, `coordctl completion bash|zsh`, a "did you
// mean" on a typo'd command, and flag errors that say what a value should
// look like. None of them contacts a server.

// localCommands are the commands that need no server, for the usage text.
var localCommands = []struct{ usage, summary string }{
	{"version", "show the build: version, commit, build time, log format (also --version; -o json)"},
	{"completion bash|zsh", "print a shell completion script: source <(coordctl completion bash)"},
}

// localCommand answers the commands that need no server: version and
// completion. ok is false for anything else. g holds the global flags
// given before the command; version takes them after it too (-o json).
func localCommand(rest []string, g *globals) (err error, ok bool) {
	switch rest[0] {
	case "version":
		fs := newFlagSet("coordctl version", g)
		pos, err := parseFlags(fs, rest[1:], true)
		switch {
		case errors.Is(err, flag.ErrHelp):
			return &helpRequest{"Usage: coordctl version [-o table|json]\n\n" + localCommands[0].summary + "\n"}, true
		case err != nil:
			return fmt.Errorf("version: %w", err), true
		case len(pos) > 0:
			return fmt.Errorf("version: takes no arguments, got %q", pos[0]), true
		case g.output != "table" && g.output != "json":
			return fmt.Errorf("bad output format %q: want table or json", g.output), true
		}
		info := buildinfo.Read("coordctl")
		if g.output == "json" {
			var b strings.Builder
			if err := writeJSON(&b, info); err != nil {
				return err, true
			}
			return &helpRequest{b.String()}, true
		}
		return &helpRequest{info.Text()}, true
	case "completion":
		if len(rest) != 2 || (rest[1] != "bash" && rest[1] != "zsh") {
			return errors.New("completion: want 'coordctl completion bash' or 'coordctl completion zsh'"), true
		}
		return &helpRequest{completionScript(rest[1])}, true
	}
	return nil, false
}

// isVersionFlag reports a leading --version (or -version, -v is not one:
// it is too easily a typo of another flag).
func isVersionFlag(args []string) bool {
	return len(args) > 0 && (args[0] == "--version" || args[0] == "-version")
}

// suggest returns the closest of names to typo (edit distance at most 2,
// or a prefix), or "".
func suggest(typo string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		d := editDistance(typo, n)
		if strings.HasPrefix(n, typo) && len(typo) >= 3 {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	return best
}

func didYouMean(typo string, names []string) string {
	if s := suggest(typo, names); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

// didYouMeanTop suggests a group, or else a group's command when the typo
// is close to a command name ("statu" → "cluster status").
func didYouMeanTop(typo string) string {
	if s := suggest(typo, groupNames()); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	var leaves []string
	byLeaf := map[string]string{}
	for _, g := range groups {
		for _, c := range g.cmds {
			if c.name != "" {
				leaves = append(leaves, c.name)
				if _, ok := byLeaf[c.name]; !ok {
					byLeaf[c.name] = g.name + " " + c.name
				}
			}
		}
	}
	if s := suggest(typo, leaves); s != "" {
		return fmt.Sprintf("; did you mean %q?", byLeaf[s])
	}
	return ""
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func groupNames() []string {
	names := []string{"help", "version", "completion"}
	for _, g := range groups {
		names = append(names, g.name)
	}
	return names
}

func commandNames(g *group) []string {
	var names []string
	for _, c := range g.cmds {
		names = append(names, c.name)
	}
	return names
}

var badFlagValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([A-Za-z0-9-]+): (.*)$`)

// explainFlagError rewrites the flag package's "invalid value" error so it
// says what the value should look like (a duration like 5s, a number).
func explainFlagError(fs *flag.FlagSet, err error) error {
	m := badFlagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	f := fs.Lookup(m[2])
	if f == nil {
		return err
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return fmt.Errorf("invalid value %[2]q for --%[1]s: want a duration like 5s, 500ms or 2m", m[2], m[1])
		case int, int64, uint, uint64:
			return fmt.Errorf("invalid value %[2]q for --%[1]s: want a whole number", m[2], m[1])
		case float64:
			return fmt.Errorf("invalid value %[2]q for --%[1]s: want a number", m[2], m[1])
		case bool:
			return fmt.Errorf("invalid value %[2]q for --%[1]s: want true or false", m[2], m[1])
		}
	}
	return fmt.Errorf("invalid value %q for --%s: %s", m[1], m[2], m[3])
}

// completionScript completes groups, their commands and the global flags.
func completionScript(shell string) string {
	var cases strings.Builder
	var gnames []string
	for _, g := range groups {
		gnames = append(gnames, g.name)
		if directCommand(g) != nil {
			continue
		}
		fmt.Fprintf(&cases, "    %s) words=%q ;;\n", g.name, strings.Join(commandNames(g), " "))
	}
	sort.Strings(gnames)
	top := strings.Join(append(gnames, "help", "version", "completion"), " ")
	flags := "--endpoints --output -o --timeout --tls-ca --tls-cert --tls-key --token --token-file --help"
	bash := fmt.Sprintf(`# bash completion for coordctl: source <(coordctl completion bash)
_coordctl() {
  local cur words grp i
  cur="${COMP_WORDS[COMP_CWORD]}"
  grp=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "${COMP_WORDS[i]}" in
      -*) ;;
      *) grp="${COMP_WORDS[i]}"; break ;;
    esac
  done
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W %q -- "$cur")); return
  fi
  if [[ -z "$grp" ]]; then
    COMPREPLY=($(compgen -W %q -- "$cur")); return
  fi
  words=""
  case "$grp" in
%s    completion) words="bash zsh" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -F _coordctl coordctl
`, flags, top, cases.String())
	if shell == "bash" {
		return bash
	}
	return "# zsh completion for coordctl: source <(coordctl completion zsh)\nautoload -U +X bashcompinit && bashcompinit\n" +
		strings.TrimPrefix(bash, "# bash completion for coordctl: source <(coordctl completion bash)\n")
}
