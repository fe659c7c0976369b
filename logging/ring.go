package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
)

// Entry is one kept log line.
type Entry struct {
	Time, Level, Logger, Message string
	// JSON is the whole line as hclog wrote it, fields included.
	JSON string
}

// Ring keeps the last n lines written to it. hclog writes each line with
// one Write call, which is what Ring relies on; a write holding several
// lines is split.
type Ring struct {
	mu      sync.Mutex
	lines   []Entry
	next    int
	full    bool
	dropped uint64
}

// NewRing keeps up to n lines (n >= 1).
func NewRing(n int) *Ring { return &Ring{lines: make([]Entry, max(n, 1))} }

// Write adds each line of p.
func (r *Ring) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			r.add(parseEntry(line))
		}
	}
	return len(p), nil
}

func (r *Ring) add(e Entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full {
		r.dropped++
	}
	r.lines[r.next] = e
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
}

// Entries returns up to limit of the newest lines, oldest first (limit
// <= 0: all), and how many lines were pushed out of the ring so far.
func (r *Ring) Entries(limit int) ([]Entry, uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Entry
	if r.full {
		out = append(out, r.lines[r.next:]...)
	}
	out = append(out, r.lines[:r.next]...)
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, r.dropped
}

// parseEntry reads the standard fields of an hclog JSON line; a line that
// is not JSON is kept whole as its message.
func parseEntry(line []byte) Entry {
	e := Entry{JSON: string(line)}
	var m map[string]any
	if json.Unmarshal(line, &m) != nil {
		e.Message = string(line)
		return e
	}
	str := func(k string) string {
		if v, ok := m[k]; ok {
			return fmt.Sprint(v)
		}
		return ""
	}
	e.Time, e.Level, e.Logger, e.Message = str("@timestamp"), str("@level"), str("@module"), str("@message")
	return e
}
