package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// VersityGWVersion is the versitygw release the tests run against; the
// Makefile's VERSITYGW_VERSION installs the same one (a test checks they
// agree). v1.8.0 is the first whose conditional PUTs are atomic per key,
// which objectstore.Create's exclusivity relies on.
const VersityGWVersion = "v1.8.0"

// RequireRealServersEnv names the environment variable `make test` sets:
// with it, a test whose pinned server (bin/tools) is missing fails instead
// of skipping, so a fresh clone's `make test` cannot pass without it.
const RequireRealServersEnv = "COORDD_REQUIRE_REAL_SERVERS"

// versityGWRelPath is where `make tools` installs versitygw, relative to
// the module root.
var versityGWRelPath = filepath.Join("bin", "tools", "versitygw-"+VersityGWVersion, "versitygw")

// S3 test credentials: the server's root account and what clients sign
// with. They are throwaway values for a loopback server a test owns.
const (
	S3TestAccessKey = "coordd-test"
	S3TestSecretKey = "coordd-test-secret"
)

// S3Server is a versitygw process on loopback serving one bucket from a
// data directory the test owns (posix backend). Stop it, or let the test's
// cleanup do so; Kill and Restart simulate a crash and a restart on the
// same data, at the same address.
type S3Server struct {
	t       testing.TB // the test that started it (owns its directories)
	bin     string
	Addr    string // 127.0.0.1:port
	Bucket  string
	DataDir string // the posix root; the bucket is its subdirectory
	sidecar string // metadata directory when the file system has no user xattrs
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// VersityGWBinary returns the pinned versitygw's path under the module
// root. When it is not installed it skips t, naming `make tools`, or fails
// it when RequireRealServersEnv is set.
func VersityGWBinary(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("versitygw: %v", err)
	}
	bin, missing, fail := findVersityGW(root)
	if fail {
		t.Fatal(missing)
	}
	if missing != "" {
		t.Skip(missing)
	}
	return bin
}

// findVersityGW: the pinned versitygw under root; when it is absent, why,
// and whether that fails the test (RequireRealServersEnv) or skips it.
func findVersityGW(root string) (bin, missing string, fail bool) {
	bin = filepath.Join(root, versityGWRelPath)
	if _, err := os.Stat(bin); err == nil {
		return bin, "", false
	}
	missing = fmt.Sprintf("versitygw %s (a real S3 server) is not installed at %s: run `make tools` (target %s)",
		VersityGWVersion, bin, filepath.ToSlash(versityGWRelPath))
	if os.Getenv(RequireRealServersEnv) == "1" {
		return bin, fmt.Sprintf("%s; %s=1 requires it", missing, RequireRealServersEnv), true
	}
	return bin, missing, false
}

// moduleRoot is the nearest directory above the working directory (a
// package's, under go test) holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory: run the tests from inside the module")
		}
		dir = parent
	}
}

// StartS3Server starts versitygw with bucket in a fresh data directory
// and waits until it answers; the test's cleanup stops it.
func StartS3Server(t testing.TB, bucket string) *S3Server {
	t.Helper()
	s := &S3Server{t: t, bin: VersityGWBinary(t), Bucket: bucket, DataDir: t.TempDir()}
	if err := os.Mkdir(filepath.Join(s.DataDir, bucket), 0o755); err != nil {
		t.Fatal(err)
	}
	s.logPath = filepath.Join(t.TempDir(), "versitygw.log")
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("versitygw log (%s):\n%s", s.logPath, s.logTail())
		}
	})
	var err error
	// A free port is found by listening and closing, so another process
	// may take it first: try a few.
	for range 5 {
		if s.Addr, err = freeLoopbackAddr(); err != nil {
			t.Fatal(err)
		}
		if err = s.start(); err == nil {
			return s
		}
	}
	t.Fatalf("start versitygw: %v\n%s", err, s.logTail())
	return nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// start runs the process on s.Addr and waits until it answers HTTP. The
// root credentials go in its environment, not on its command line.
func (s *S3Server) start() error {
	args := []string{"--port", s.Addr, "posix"}
	if s.sidecar != "" {
		args = append(args, "--sidecar", s.sidecar)
	}
	args = append(args, s.DataDir)
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+S3TestAccessKey, "ROOT_SECRET_ACCESS_KEY="+S3TestSecretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	s.cmd, s.exited, s.waitErr = cmd, make(chan struct{}), nil
	go func(exited chan struct{}) { s.waitErr = cmd.Wait(); close(exited) }(s.exited)
	err = s.waitReady()
	if err != nil && s.sidecar == "" && strings.Contains(s.logTail(), "xattr") {
		// No user xattrs on this file system: keep metadata beside it.
		s.sidecar = filepath.Join(s.t.TempDir(), "meta")
		if mkErr := os.Mkdir(s.sidecar, 0o755); mkErr != nil {
			return mkErr
		}
		return s.start()
	}
	return err
}

// waitReady polls the endpoint until any HTTP answer (an anonymous
// request is refused, which is an answer), or fails when the process
// exits or Timeout(20s) passes.
func (s *S3Server) waitReady() error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(Timeout(20 * time.Second))
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("versitygw exited before answering on %s: %v", s.Addr, s.waitErr)
		default:
		}
		if resp, err := client.Get(s.Endpoint()); err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return fmt.Errorf("versitygw did not answer on %s within %v", s.Addr, Timeout(20*time.Second))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// NewBucket adds another bucket to the server and returns its s3:// URL.
func (s *S3Server) NewBucket(t testing.TB, name string) string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(s.DataDir, name), 0o755); err != nil {
		t.Fatalf("new bucket: %v", err)
	}
	return S3URL(name, s.Endpoint())
}

// Endpoint is the server's http:// URL.
func (s *S3Server) Endpoint() string { return "http://" + s.Addr }

// URL is an objectstore s3:// URL for the bucket on this server.
func (s *S3Server) URL() string { return S3URL(s.Bucket, s.Endpoint()) }

// S3URL is an objectstore s3:// URL for bucket at endpoint (path-style
// addressing, the region versitygw answers for).
func S3URL(bucket, endpoint string) string {
	return "s3://" + bucket + "?endpoint=" + endpoint + "&use_path_style=true&region=us-east-1"
}

// Env is the environment a client process needs to reach the bucket with
// the given credentials: the AWS variables, and shared config files that
// do not exist so nothing on the machine overrides them.
func (s *S3Server) Env(accessKey, secretKey string) []string {
	none := filepath.Join(s.DataDir, "no-such-aws-file")
	return []string{"AWS_ACCESS_KEY_ID=" + accessKey, "AWS_SECRET_ACCESS_KEY=" + secretKey,
		"AWS_CONFIG_FILE=" + none, "AWS_SHARED_CREDENTIALS_FILE=" + none}
}

// UseCredentials sets the environment of this test process (and the
// processes it starts) to sign with the given credentials, for the rest of
// the test (t.Setenv: not for parallel tests).
func (s *S3Server) UseCredentials(t testing.TB, accessKey, secretKey string) {
	t.Helper()
	for _, kv := range s.Env(accessKey, secretKey) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// UseTestCredentials is UseCredentials with the server's root account.
func (s *S3Server) UseTestCredentials(t testing.TB) {
	s.UseCredentials(t, S3TestAccessKey, S3TestSecretKey)
}

// Kill SIGKILLs the server and waits until it is gone.
func (s *S3Server) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd = nil
}

// Stop ends the server (a test's cleanup does this too).
func (s *S3Server) Stop() { s.Kill() }

// Restart starts a killed or stopped server again on the same data
// directory and address, and waits until it answers.
func (s *S3Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	var err error
	// The address was ours until the kill; a restart races only with
	// other processes picking free ports, so retry briefly.
	deadline := time.Now().Add(Timeout(10 * time.Second))
	for {
		if err = s.start(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("restart versitygw on %s: %v\n%s", s.Addr, err, s.logTail())
	}
}

func (s *S3Server) logTail() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	if lines := bytes.Split(b, []byte("\n")); len(lines) > 30 {
		b = bytes.Join(lines[len(lines)-30:], []byte("\n"))
	}
	return string(b)
}
