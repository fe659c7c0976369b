// Package statuspage renders the status page a member serves at /ui: one
// server-rendered HTML page (html/template, embedded; no JavaScript) that
// refreshes itself. Its first line is a verdict (verdict.go: healthy,
// degraded or unavailable, with why); below it the members with their
// leader, term, applied index and lag; the PChannels of each streaming
// node; broadcasts in flight and failing callbacks; rows per collection;
// and segments by state with the checkpoint time and lag of each
// VChannel. Every section is read from the serving member's own
// replica (STALE), so the page works on followers and says which member
// drew it. Heartbeat ages are the exception: only the leader knows them,
// so only its page shows a silent streaming node (silence.go) and a
// follower's page says so and links to the leader's.
package statuspage

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"
)

//go:embed page.html
var pageHTML string

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"stateClass": stateClass,
	"ms":         humanMs,
}).Parse(pageHTML))

// DefaultRefresh is how often the page reloads itself (seconds).
const DefaultRefresh = 5

// maxRefresh bounds ?refresh=N.
const maxRefresh = 3600

// Handler serves the page. now is the clock (injected for tests).
type Handler struct {
	Source Source
	Peer   PeerStatus
	// Storage, when set, lists the durable writes this member keeps
	// failing to make, one sentence each (raftnode.Node.StorageFaults);
	// PeerStorage asks the other members the same. The verdict names them.
	Storage     func() []string
	PeerStorage PeerStorage
	// StateSize, when set, is this member's state size and the memory
	// guard's budget in bytes (raftnode.Node.StateSize); the verdict
	// names it from stateWarnPercent of the budget.
	StateSize func() (bytes, budget int64)
	Now       func() time.Time
	// Scheme is how the members' pages are reached, "http" (the default)
	// or "https" on a secure cluster; the links to them use it.
	Scheme string
}

// ServeHTTP renders the page. ?refresh=N sets the reload interval in
// seconds (0 disables it); anything else is refused with 400.
func (h Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	refresh := DefaultRefresh
	if q := r.URL.Query(); len(q) > 0 {
		for k := range q {
			if k != "refresh" {
				http.Error(w, fmt.Sprintf("unknown query parameter %q (only refresh=SECONDS)", k), http.StatusBadRequest)
				return
			}
		}
		n, err := strconv.Atoi(q.Get("refresh"))
		if err != nil || n < 0 || n > maxRefresh || len(q["refresh"]) != 1 {
			http.Error(w, fmt.Sprintf("bad refresh %q: want one whole number of seconds from 0 to %d", q.Get("refresh"), maxRefresh), http.StatusBadRequest)
			return
		}
		refresh = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	v := gather(ctx, h)
	v.Refresh, v.Scheme = refresh, h.scheme()
	var buf bytes.Buffer
	if err := pageTmpl.Execute(&buf, v); err != nil {
		http.Error(w, "render status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page needs no script, frame or outside resource; say so.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	_, _ = w.Write(buf.Bytes())
}

// stateClass maps a PChannel, node or broadcast state to its CSS colour
// class: ASSIGNING amber, UNAVAILABLE and DOWN red.
func stateClass(state string) string {
	switch state {
	case "ASSIGNED", "UP", "Flushed":
		return "ok"
	case "ASSIGNING", "DRAINING", "PENDING":
		return "warn"
	case "UNAVAILABLE", "DOWN", "UNINITIALIZED", stateSilent:
		return "bad"
	}
	return "plain"
}

// humanMs is a lag in milliseconds as a short duration ("1.5s", "3m0s").
func humanMs(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d < time.Second {
		return d.String()
	}
	return d.Round(100 * time.Millisecond).String()
}
