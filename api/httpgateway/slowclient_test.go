package httpgateway

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/api/auth"
)

// TestRefusedRequestBodyIsNotWaitedFor: a request without credentials that
// announces a 100 kB body and sends one byte is answered 401 and its
// connection closed at once; the member does not wait for the body
// (net/http would otherwise read it, as slowly as it comes, to reuse the
// connection).
func TestRefusedRequestBodyIsNotWaitedFor(t *testing.T) {
	_, hs, _ := securedGateway(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(hs.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "POST /v1/alloc/id HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatalf("the connection was not closed after the answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !resp.Close {
		t.Fatalf("got %s (close %v), want 401 with Connection: close", resp.Status, resp.Close)
	}
	var one [1]byte
	if _, err := c.Read(one[:]); err == nil || isTimeout(err) {
		t.Fatalf("after the answer, read gave %v; want the connection closed by the member", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answered and closed after %v", d)
	}
}

// TestAuthenticatedRequestTrustsItsConnection: behind a LimitedListener, a
// connection that carried a request with a valid token counts as trusted
// (it keeps its slot ahead of unauthenticated ones); one that only asked
// for /healthz, which needs no credential, does not.
func TestAuthenticatedRequestTrustsItsConnection(t *testing.T) {
	gw, _, tokens := securedGateway(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := LimitListener(raw, ConnLimits{Max: 10, MaxUnauthenticated: 5})
	hs := &http.Server{Handler: gw, ConnContext: lim.ConnContext, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(lim) }()
	t.Cleanup(func() { hs.Close() })
	base := "http://" + raw.Addr().String()

	get := func(c *http.Client, path, token string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
	}
	probe := &http.Client{Transport: &http.Transport{}}
	get(probe, "/healthz", "")
	reader := &http.Client{Transport: &http.Transport{}}
	get(reader, "/v1/cluster/status", tokens[auth.RoleRead])
	deadline := time.Now().Add(2 * time.Second)
	for (lim.Open() != 2 || lim.Unauthenticated() != 1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if lim.Open() != 2 || lim.Unauthenticated() != 1 {
		t.Fatalf("open %d, unauthenticated %d; want 2 open (both kept alive), 1 unauthenticated (the probe's)", lim.Open(), lim.Unauthenticated())
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
