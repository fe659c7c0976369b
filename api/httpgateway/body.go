package httpgateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"time"
)

// deliverBody reads a request's body (at most maxBodyBytes+1 bytes, within
// the server's read timeout) before any handler runs, and replaces it with
// what was read: until the body is in, the request is the client's wait,
// not the member's work, and its connection may be evicted under a flood
// (LimitedListener). A body over the bound is left for the handler to
// refuse by its size, as before.
func deliverBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	if err != nil {
		return fmt.Errorf("read body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return nil
}

// skipBody makes the server close the connection after the answer instead
// of reading the rest of a body no one will use (net/http otherwise reads
// up to 256 KiB of it, as slowly as the client sends it, to keep the
// connection alive).
func skipBody(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 {
		return
	}
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
