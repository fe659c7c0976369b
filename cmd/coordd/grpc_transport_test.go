package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/vocab"
)

// headerLimitServer serves the health service with the API port's
// transport options behind an interceptor that stands in for
// authentication: it counts the calls that reach it and refuses them all.
func headerLimitServer(t *testing.T) (addr string, reached *atomic.Int64) {
	t.Helper()
	reached = new(atomic.Int64)
	deny := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		reached.Add(1)
		return nil, status.Error(codes.Unauthenticated, "no credentials")
	}
	l := limitFlags{GRPCMaxStreams: 100, GRPCKeepaliveMinTime: 10 * time.Second, GRPCHandshakeTimeout: 10 * time.Second}
	g := grpc.NewServer(append(grpcTransportOptions(l), grpc.UnaryInterceptor(deny))...)
	healthpb.RegisterHealthServer(g, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return lis.Addr().String(), reached
}

// TestGRPCHeadersAreBoundedBeforeAuthentication (probe D16): the API port
// reads at most vocab.MaxGRPCHeaderListBytes of metadata per call before
// authentication. A call under the limit reaches authentication (and is
// refused there); one over it is refused by the transport and never
// reaches it, whether the client is grpc-go (which sees the server's
// limit) or a raw HTTP/2 client that ignores it and sends 2 MB anyway.
func TestGRPCHeadersAreBoundedBeforeAuthentication(t *testing.T) {
	addr, reached := headerLimitServer(t)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	call := func(padBytes int) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-pad", strings.Repeat("a", padBytes))
		_, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := call(vocab.MaxGRPCHeaderListBytes / 2); status.Code(err) != codes.Unauthenticated || reached.Load() != 1 {
		t.Fatalf("a call with %d bytes of metadata: %v (reached authentication %d times), want Unauthenticated",
			vocab.MaxGRPCHeaderListBytes/2, err, reached.Load())
	}
	if err := call(2 * vocab.MaxGRPCHeaderListBytes); err == nil || status.Code(err) == codes.Unauthenticated || reached.Load() != 1 {
		t.Fatalf("a call with %d bytes of metadata: %v (reached authentication %d times), want a transport refusal",
			2*vocab.MaxGRPCHeaderListBytes, err, reached.Load())
	}

	got, err := rawHugeHeaderCall(addr, 2*vocab.MaxGRPCHeaderListBytes)
	if err != nil {
		t.Fatal(err)
	}
	if reached.Load() != 1 || strings.Contains(got, "grpc-status=16") {
		t.Fatalf("a raw HTTP/2 call with %d bytes of headers was answered %q and reached authentication %d times, want a refusal before it",
			2*vocab.MaxGRPCHeaderListBytes, got, reached.Load())
	}
	t.Logf("raw HTTP/2 call with 2 MB of headers: %s", got)
}

// rawHugeHeaderCall sends one gRPC call whose header block holds padBytes
// of extra fields (in 1 KB fields, so no single string is over the limit),
// then an empty request message, and describes how the server ended the
// stream: "rst=CODE", "goaway=CODE", "closed: ...", or the response's header
// fields (e.g. "grpc-status=16" when it reached authentication).
func rawHugeHeaderCall(addr string, padBytes int) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		return "", err
	}
	fr := http2.NewFramer(c, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.MaxHeaderListSize = 1 << 20
	if err := fr.WriteSettings(); err != nil {
		return "", err
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/grpc.health.v1.Health/Check"},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		if err := enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return "", err
		}
	}
	pad := strings.Repeat("p", 1000)
	for i := 0; block.Len() < padBytes; i++ {
		if err := enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-pad-%d", i), Value: pad}); err != nil {
			return "", err
		}
	}
	// The writes run beside the reads: a server that stops reading must
	// not block the test.
	werr := make(chan error, 1)
	go func() {
		b := block.Bytes()
		const chunk = 16 << 10
		first := b[:chunk]
		b = b[chunk:]
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first})
		for err == nil && len(b) > 0 {
			n := min(chunk, len(b))
			err = fr.WriteContinuation(1, n == len(b), b[:n])
			b = b[n:]
		}
		if err == nil {
			err = fr.WriteData(1, true, make([]byte, 5)) // an empty message, uncompressed
		}
		werr <- err
	}()
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) {
			return "closed: " + err.Error(), nil
		}
		if err != nil {
			return "", fmt.Errorf("read frame (write: %v): %w", drain(werr), err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			return fmt.Sprintf("rst=%v", f.ErrCode), nil
		case *http2.GoAwayFrame:
			return fmt.Sprintf("goaway=%v", f.ErrCode), nil
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				var fields []string
				for _, hf := range f.Fields {
					fields = append(fields, hf.Name+"="+hf.Value)
				}
				return strings.Join(fields, " "), nil
			}
		}
	}
}

// drain returns the writer's outcome if it has one.
func drain(ch chan error) error {
	select {
	case err := <-ch:
		return err
	default:
		return nil
	}
}
