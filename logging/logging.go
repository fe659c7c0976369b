// Package logging builds a member's hclog logger: text or JSON lines, a
// level that can be changed while the process runs (every sub-logger
// follows it), a small in-memory ring of the most recent error lines (for
// `coordctl debug bundle`), and a request-scoped logger carried in a
// context so that every line logged while serving one request names its
// request ID.
package logging

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Formats are the accepted --log-format values.
var Formats = []string{"text", "json"}

// Levels are the accepted --log-level values, most verbose first.
var Levels = []string{"trace", "debug", "info", "warn", "error"}

// DefaultRecent is how many error lines the ring keeps.
const DefaultRecent = 200

// Options configure New.
type Options struct {
	Name   string
	Level  string // one of Levels
	Format string // one of Formats ("" = text)
	Output io.Writer
	// Recent is the ring size (0 = DefaultRecent).
	Recent int
}

// Logs is a member's logging: its root logger, its level and its ring of
// recent errors.
type Logs struct {
	root hclog.InterceptLogger
	ring *Ring
	mu   sync.Mutex // orders SetLevel calls so "previous" is exact
}

// ParseLevel checks a level name (case-insensitive) and returns it in
// lower case.
func ParseLevel(s string) (hclog.Level, string, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	for _, l := range Levels {
		if name == l {
			return hclog.LevelFromString(name), name, nil
		}
	}
	return hclog.NoLevel, "", fmt.Errorf("unknown log level %q: want one of %s", s, strings.Join(Levels, ", "))
}

// CheckFormat checks a --log-format value.
func CheckFormat(s string) error {
	for _, f := range Formats {
		if s == f {
			return nil
		}
	}
	return fmt.Errorf("unknown log format %q: want text or json", s)
}

// New builds the logging of one process.
func New(o Options) (*Logs, error) {
	level, _, err := ParseLevel(o.Level)
	if err != nil {
		return nil, err
	}
	if o.Format == "" {
		o.Format = "text"
	}
	if err := CheckFormat(o.Format); err != nil {
		return nil, err
	}
	if o.Recent <= 0 {
		o.Recent = DefaultRecent
	}
	l := &Logs{ring: NewRing(o.Recent)}
	l.root = hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name: o.Name, Level: level, Output: o.Output, JSONFormat: o.Format == "json",
	})
	// The sink sees every line whatever the root's level, so errors are kept
	// even when an operator turned the log down to nothing but errors (or
	// the other way round). It writes one JSON object per line.
	l.root.RegisterSink(hclog.NewSinkAdapter(&hclog.LoggerOptions{
		Name: o.Name, Level: hclog.Error, Output: l.ring, JSONFormat: true,
	}))
	return l, nil
}

// Logger is the root logger; sub-loggers made from it (Named, With) share
// its level and its ring.
func (l *Logs) Logger() hclog.Logger { return l.root }

// Level is the current level's name.
func (l *Logs) Level() string { return l.root.GetLevel().String() }

// SetLevel changes the level of every logger of the process at once and
// returns the level it replaced. A bad name changes nothing.
func (l *Logs) SetLevel(name string) (previous string, err error) {
	level, _, err := ParseLevel(name)
	if err != nil {
		return "", err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	previous = l.Level()
	l.root.SetLevel(level)
	return previous, nil
}

// Recent returns up to limit of the most recent error lines, oldest first
// (limit <= 0: all kept), and how many older lines the ring dropped.
func (l *Logs) Recent(limit int) ([]Entry, uint64) { return l.ring.Entries(limit) }
