package main

import (
	"os"
	"sort"
	"strings"
	"testing"
)

// readmeSynopsis parses the coordctl block of the README into "group
// command" entries ("insert" alone for a group that is a command):
// each line starts with a group, alternatives are separated by " | ", and
// an alternative's first word is the command (a repeated group name is
// skipped, as in "alloc ts N | alloc id N").
func readmeSynopsis(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	start := strings.Index(text, "## coordctl\n")
	if start < 0 {
		t.Fatal("README has no coordctl section")
	}
	block := text[start:]
	block = block[strings.Index(block, "```")+3:]
	block = block[:strings.Index(block, "```")]
	seen := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue // the "coordctl [--endpoints ...]" lines
		}
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "[") || strings.HasPrefix(f[0], "-") {
			continue // a continuation of the line above
		}
		grp := f[0]
		g := findGroup(grp)
		if g == nil {
			seen[grp] = true // reported as unknown below
			continue
		}
		if directCommand(g) != nil {
			seen[grp] = true
			continue
		}
		for _, alt := range splitAlternatives(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), grp))) {
			w := strings.Fields(alt)
			if len(w) > 0 && w[0] == grp {
				w = w[1:]
			}
			if len(w) > 0 {
				seen[grp+" "+w[0]] = true
			}
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestREADMESynopsisMatchesTheCommands: the README's coordctl synopsis
// names exactly coordctl's commands.
func TestREADMESynopsisMatchesTheCommands(t *testing.T) {
	want := map[string]bool{"version": true, "completion": true}
	for _, g := range groups {
		if directCommand(g) != nil {
			want[g.name] = true
			continue
		}
		for _, c := range g.cmds {
			want[g.name+" "+c.name] = true
		}
	}
	got := readmeSynopsis(t)
	gotSet := map[string]bool{}
	for _, e := range got {
		gotSet[e] = true
		if !want[e] {
			t.Errorf("README synopsis names %q, which coordctl does not have", e)
		}
	}
	var missing []string
	for e := range want {
		if !gotSet[e] {
			missing = append(missing, e)
		}
	}
	sort.Strings(missing)
	for _, e := range missing {
		t.Errorf("coordctl %s is missing from the README synopsis", e)
	}
}

// splitAlternatives splits at " | " outside brackets ("[--a | --b]" is
// one alternative's flags).
func splitAlternatives(s string) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case '|':
			if depth == 0 && i > 0 && s[i-1] == ' ' && i+1 < len(s) && s[i+1] == ' ' {
				out = append(out, strings.TrimSpace(s[last:i]))
				last = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[last:]))
}
