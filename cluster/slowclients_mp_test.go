package cluster_test

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coordd/coordd/cluster"
)

// slowFlood is one kind of connection a slow client holds open.
type slowFlood struct {
	name string
	n    int
	// send is what the client writes after connecting (and, on TLS, after
	// the handshake); nil: nothing.
	send []byte
	// handshake says whether the client finishes the TLS handshake first
	// (on a TLS port); false holds a bare TCP connection open.
	handshake bool
}

// raiseNoFile raises the soft RLIMIT_NOFILE to need (up to the hard
// limit) for the test, or skips it when the hard limit is below need.
func raiseNoFile(t *testing.T, need uint64) {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Cur >= need {
		return
	}
	if rl.Max < need {
		t.Skipf("the hard RLIMIT_NOFILE (%d) is below the %d file descriptors this test's own slow clients need", rl.Max, need)
	}
	old := rl
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatalf("raise RLIMIT_NOFILE: %v", err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// TestSlowClientsDoNotLockOutValidOnes: 1,000 connections that send a
// request's headers and one byte of a 100 kB body, 1,000 that never finish
// their headers and 500 that finish the TLS handshake and stay idle, none
// with a credential, against a member capped at 1,000 HTTP connections.
// While they are held, a client with a valid token (a new connection per
// request) is served every time, each within 2 s; every slow connection is
// closed by the member within its timeouts. Run secure (the slow clients
// without a token) and, as the explicit variant, plaintext. Before the
// slow-client limits, the valid client got 503 "too many open connections"
// (plaintext) or a closed TLS connection for --http-read-timeout.
func TestSlowClientsDoNotLockOutValidOnes(t *testing.T) {
	const (
		headerTimeout = 2 * time.Second
		validBound    = 2 * time.Second
	)
	floods := []slowFlood{
		{name: "slow body", n: 1000, handshake: true,
			send: []byte("POST /v1/alloc/id HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")},
		{name: "slow headers", n: 1000, handshake: true, send: []byte("GET /v1/cluster/status HTTP/1.1\r\nHost: x\r\n")},
		{name: "idle", n: 500, handshake: true},
	}
	total := 0
	for _, f := range floods {
		total += f.n
	}
	raiseNoFile(t, uint64(total+1500))
	for _, secure := range []bool{true, false} {
		// TLS handshakes are slow on a loaded machine: there the read
		// timeout is long enough for every slow body to be held (before
		// these limits, for all of it) while the rest of the flood opens.
		name, readTimeout := "tls", 15*time.Second
		if !secure {
			name, readTimeout = "plaintext", 4*time.Second
		}
		args := append([]string{"--http-max-conns", "1000", "--http-read-header-timeout", headerTimeout.String(),
			"--http-read-timeout", readTimeout.String()}, floodRaftTimeouts...)
		t.Run(name, func(t *testing.T) {
			if secure && pki == nil {
				t.Skip("COORDD_TEST_INSECURE=1: no TLS variant")
			}
			var l *cluster.Launcher
			if secure {
				l = startClusterWith(t, cluster.LauncherConfig{ExtraArgs: args})
			} else {
				l = startInsecureClusterWith(t, cluster.LauncherConfig{ExtraArgs: args})
			}
			m := l.Members()[0]
			var tlsCfg *tls.Config
			if ours(l) {
				tlsCfg = pki.tls.Clone()
				tlsCfg.NextProtos = []string{"http/1.1"} // raw HTTP/1.1 on the held connections
				// Resumed sessions skip the certificate work, so the flood
				// opens faster than the member's timeouts close it.
				tlsCfg.ClientSessionCache = tls.NewLRUClientSessionCache(64)
			}

			// Hold the slow connections; each goroutine notes when the
			// member closed its connection.
			type held struct {
				kind   string
				opened time.Time
				closed atomic.Int64 // unix nanos; 0 while open
			}
			var mu sync.Mutex
			var conns []net.Conn
			var all []*held
			var dialFailed atomic.Int64
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range conns {
					c.Close()
				}
			}()
			var wg sync.WaitGroup
			work := make(chan slowFlood)
			for w := 0; w < 16; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for f := range work {
						c, err := net.DialTimeout("tcp", m.HTTPAddr, 2*time.Second)
						if err != nil {
							dialFailed.Add(1)
							continue
						}
						if tlsCfg != nil && f.handshake {
							tc := tls.Client(c, tlsCfg)
							_ = tc.SetDeadline(time.Now().Add(2 * time.Second))
							if err := tc.Handshake(); err != nil {
								dialFailed.Add(1)
								c.Close()
								continue
							}
							_ = tc.SetDeadline(time.Time{})
							c = tc
						}
						if f.send != nil {
							_, _ = c.Write(f.send)
						}
						h := &held{kind: f.name, opened: time.Now()}
						mu.Lock()
						conns, all = append(conns, c), append(all, h)
						mu.Unlock()
						go func() {
							_, _ = io.Copy(io.Discard, c)
							h.closed.Store(time.Now().UnixNano())
						}()
					}
				}()
			}
			for _, f := range floods {
				for i := 0; i < f.n; i++ {
					work <- f
				}
			}
			close(work)
			wg.Wait()
			floodDone := time.Now()

			// The valid client, while the slow connections are held.
			hc := httpClient(validBound)
			var lat []time.Duration
			for i := 0; i < 20; i++ {
				start := time.Now()
				resp, err := hc.Get(memberURL(l, m.HTTPAddr, "/v1/cluster/status"))
				d := time.Since(start)
				if err != nil {
					t.Fatalf("valid request %d during the flood: %v (after %v)", i, err, d)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("valid request %d during the flood: %s (after %v)", i, resp.Status, d)
				}
				lat = append(lat, d)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			t.Logf("%d slow connections opened in %v (%d refused at connect), valid client: p50 %v, max %v",
				len(all), floodDone.Sub(all[0].opened).Round(time.Millisecond), dialFailed.Load(), lat[len(lat)/2], lat[len(lat)-1])
			if lat[len(lat)-1] > validBound {
				t.Errorf("a valid request took %v during the flood (bound %v)", lat[len(lat)-1], validBound)
			}

			// Every slow connection is closed by the member within its
			// timeouts (evicted earlier, or timed out): the read timeout
			// bounds them all, plus slack for a loaded machine.
			until := floodDone.Add(readTimeout + 5*time.Second)
			for time.Now().Before(until) {
				open := 0
				mu.Lock()
				for _, h := range all {
					if h.closed.Load() == 0 {
						open++
					}
				}
				mu.Unlock()
				if open == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			mu.Lock()
			defer mu.Unlock()
			longest := map[string]time.Duration{}
			for _, h := range all {
				c := h.closed.Load()
				if c == 0 {
					t.Errorf("a %s connection opened at %s is still open %v after the flood", h.kind, h.opened.Format("15:04:05.000"),
						time.Since(floodDone).Round(time.Millisecond))
					break
				}
				longest[h.kind] = max(longest[h.kind], time.Unix(0, c).Sub(h.opened))
			}
			t.Logf("longest a slow connection was held, by kind: %v", longest)
			if d := longest["slow headers"]; d > headerTimeout+3*time.Second {
				t.Errorf("a slow-header connection was held %v (--http-read-header-timeout %v)", d, headerTimeout)
			}
			if d := longest["idle"]; d > headerTimeout+3*time.Second {
				t.Errorf("an idle connection was held %v (--http-read-header-timeout %v)", d, headerTimeout)
			}
		})
	}
}
