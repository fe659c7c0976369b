package objectstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordd/coordd/testutil"
)

// gateProxy forwards loopback TCP connections to target until limit
// bytes have gone from its clients to the server; then it closes reached
// and holds every byte after that until open is called. A test learns
// that an upload is under way, and knows it cannot finish, without
// timing.
type gateProxy struct {
	l       net.Listener
	target  string
	limit   int64
	sent    atomic.Int64
	reached chan struct{}
	once    sync.Once
	opened  chan struct{}
}

func startGateProxy(t *testing.T, target string, limit int64) *gateProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{l: l, target: target, limit: limit, reached: make(chan struct{}), opened: make(chan struct{})}
	t.Cleanup(func() { l.Close(); p.open() })
	go p.serve()
	return p
}

// open lets everything through from now on.
func (p *gateProxy) open() {
	select {
	case <-p.opened:
	default:
		close(p.opened)
	}
}

func (p *gateProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.pipe(c)
	}
}

func (p *gateProxy) pipe(c net.Conn) {
	defer c.Close()
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return // the server is down: the client sees its connection closed
	}
	defer s.Close()
	go func() { _, _ = io.Copy(c, s); c.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		for n > 0 {
			k := n
			select {
			case <-p.opened:
			default:
				if room := p.limit - p.sent.Load(); int64(k) > room {
					k = int(max(room, 0))
				}
			}
			if k == 0 {
				p.once.Do(func() { close(p.reached) })
				<-p.opened
				continue
			}
			p.sent.Add(int64(k))
			if _, werr := s.Write(buf[:k]); werr != nil {
				return
			}
			copy(buf, buf[k:n])
			n -= k
		}
		if err != nil {
			return
		}
	}
}

// A server killed in the middle of a PUT and an exclusive create, and
// restarted on the same data, holds each whole object or none of it,
// never a part; each writer gets an error (not ErrExists or ErrNotFound,
// which would name an outcome it cannot know), and its retry on the
// restarted server succeeds, or, for the create whose object did land,
// finds the writer's own object (ErrExists). Both writes run at once so
// one kill, and one round of the client's retries, serves both.
func TestS3ServerKilledMidWrite(t *testing.T) {
	s := realS3(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789abcdef"), 6<<16) // 6 MiB: two parts
	type write struct {
		op, key string
		proxy   *gateProxy
		st      Store
		err     chan error
	}
	var ws []*write
	for _, op := range []string{"put", "create"} {
		w := &write{op: op, key: "insert_log/9/9/9/100/" + op, proxy: startGateProxy(t, s.Addr, 1<<20), err: make(chan error, 1)}
		w.st = openS3(t, testutil.S3URL(s.Bucket, "http://"+w.proxy.l.Addr().String()))
		ws = append(ws, w)
	}
	do := func(w *write) error {
		if w.op == "create" {
			return w.st.Create(ctx, w.key, data)
		}
		return w.st.Put(ctx, w.key, data)
	}
	for _, w := range ws {
		go func() { w.err <- do(w) }()
	}
	for _, w := range ws {
		select {
		case <-w.proxy.reached:
		case err := <-w.err:
			t.Fatalf("the %s ended (%v) before 1 MiB of it went to the server", w.op, err)
		case <-time.After(testutil.Timeout(30 * time.Second)):
			t.Fatalf("1 MiB of the %s did not go to the server", w.op)
		}
	}
	s.Kill()
	for _, w := range ws {
		var err error
		select {
		case err = <-w.err:
		case <-time.After(testutil.Timeout(2 * time.Minute)):
			t.Fatalf("the %s did not return with its server down", w.op)
		}
		if err == nil {
			t.Fatalf("the %s succeeded although its server was killed during it", w.op)
		}
		if errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
			t.Fatalf("the interrupted %s failed with %v, which names an outcome it cannot know", w.op, err)
		}
		if !strings.Contains(err.Error(), w.key) {
			t.Fatalf("the %s's error does not name the object: %v", w.op, err)
		}
	}
	s.Restart(t)
	for _, w := range ws {
		w.proxy.open()
		got, gerr := w.st.Get(ctx, w.key)
		switch {
		case errors.Is(gerr, ErrNotFound):
		case gerr != nil:
			t.Fatalf("%s: get after the restart: %v", w.op, gerr)
		case !bytes.Equal(got, data):
			t.Fatalf("%s: after the restart the object holds %d bytes, not the %d written", w.op, len(got), len(data))
		}
		infos, err := w.st.ListInfo(ctx, w.key)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range infos {
			if o.Key != w.key || o.Size != int64(len(data)) {
				t.Fatalf("%s: after the restart the listing shows %+v", w.op, o)
			}
		}
		err = do(w)
		if w.op == "create" && gerr == nil {
			if !errors.Is(err, ErrExists) {
				t.Fatalf("retried create over the interrupted one's whole object: %v, want ErrExists", err)
			}
		} else if err != nil {
			t.Fatalf("%s: retry on the restarted server: %v", w.op, err)
		}
		if got, err := w.st.Get(ctx, w.key); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: after the retry: %d bytes, %v", w.op, len(got), err)
		}
	}
}

// Wrong credentials are refused with ErrAccessDenied, an error that says
// to check the credentials and carries the server's code, and write
// nothing; a bucket the server does not have is ErrNoBucket, never
// ErrNotFound (which a reader would take for "no such object").
func TestS3WrongCredentialsRefused(t *testing.T) {
	s := realS3(t)
	ctx := context.Background()
	for _, tc := range []struct{ name, access, secret, code string }{
		// AWS answers an unknown key 403 InvalidAccessKeyId; versitygw 404
		// XAdminUserNotFound, which gocloud would have taken for a missing
		// object.
		{"unknown key", "no-such-key", testutil.S3TestSecretKey, "XAdminUserNotFound"},
		{"wrong secret", testutil.S3TestAccessKey, "wrong-secret", "SignatureDoesNotMatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s.UseCredentials(t, tc.access, tc.secret)
			st := openS3(t, s.URL())
			for op, call := range map[string]func() error{
				"put":    func() error { return st.Put(ctx, "a/b", []byte("x")) },
				"create": func() error { return st.Create(ctx, "a/c", []byte("x")) },
				"get":    func() error { _, err := st.Get(ctx, "a/b"); return err },
				"list":   func() error { _, err := st.List(ctx, "a/"); return err },
				"delete": func() error { return st.Delete(ctx, "a/b") },
			} {
				if op == "delete" && tc.name == "unknown key" {
					// gocloud's Delete asks HEAD first, and versitygw's 404
					// to it has no body: no code tells it from a missing
					// object. (The collector lists before it deletes, and
					// its listing is refused.)
					continue
				}
				err := call()
				if !errors.Is(err, ErrAccessDenied) {
					t.Fatalf("%s with %s: %v, want ErrAccessDenied", op, tc.name, err)
				}
				want := []string{"check the S3 credentials", "AWS_ACCESS_KEY_ID", s.URL()}
				if op != "delete" { // answered to a HEAD first, which has no body to carry the code
					want = append(want, tc.code)
				}
				for _, want := range want {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%s with %s: the error does not say %q: %v", op, tc.name, want, err)
					}
				}
			}
		})
	}
	st := openS3(t, s.URL()) // the right credentials again (the subtests' ended)
	if keys, err := st.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Fatalf("after the refused writes the bucket holds %v (%v)", keys, err)
	}
	nb := openS3(t, testutil.S3URL("nobucket", s.Endpoint()))
	if err := nb.Put(ctx, "a/b", []byte("x")); !errors.Is(err, ErrNoBucket) || !strings.Contains(err.Error(), "create it first") {
		t.Fatalf("put into a missing bucket: %v, want ErrNoBucket", err)
	}
	if _, err := nb.Get(ctx, "a/b"); !errors.Is(err, ErrNoBucket) || errors.Is(err, ErrNotFound) {
		t.Fatalf("get from a missing bucket: %v, want ErrNoBucket (not ErrNotFound)", err)
	}
}
