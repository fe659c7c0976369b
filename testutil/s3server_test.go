package testutil

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The Makefile installs the versitygw the helper looks for: the same
// version, at the same path.
func TestVersityGWPinMatchesMakefile(t *testing.T) {
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"VERSITYGW_VERSION := " + VersityGWVersion + "\n",
		"VERSITYGW         := $(BIN)/tools/versitygw-$(VERSITYGW_VERSION)/versitygw\n",
		"test: build lint tools\n\t" + RequireRealServersEnv + "=1 ",
		"tools: $(STATICCHECK) $(VERSITYGW)\n",
	} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("the Makefile lacks %q", want)
		}
	}
	if got := filepath.ToSlash(versityGWRelPath); got != "bin/tools/versitygw-"+VersityGWVersion+"/versitygw" {
		t.Errorf("the helper looks in %s", got)
	}
}

// The server answers once started, is gone after Kill, and answers again
// after Restart at the same address with the objects it held.
func TestS3ServerKillAndRestart(t *testing.T) {
	s := StartS3Server(t, "bucket")
	client := &http.Client{Timeout: time.Second}
	get := func() error {
		resp, err := client.Get(s.Endpoint())
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("started server: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(s.DataDir, "bucket")); err != nil || !fi.IsDir() {
		t.Fatalf("the bucket's directory: %v", err)
	}
	addr := s.Addr
	s.Kill()
	if err := get(); err == nil {
		t.Fatal("the killed server still answers")
	}
	s.Restart(t)
	if s.Addr != addr {
		t.Fatalf("restarted on %s, was %s", s.Addr, addr)
	}
	if err := get(); err != nil {
		t.Fatalf("restarted server: %v", err)
	}
}

// Without the binary a test skips, naming `make tools` and the path; with
// COORDD_REQUIRE_REAL_SERVERS=1 (make test) it fails instead.
func TestVersityGWMissing(t *testing.T) {
	root := t.TempDir()
	t.Setenv(RequireRealServersEnv, "")
	bin, missing, fail := findVersityGW(root)
	if fail || !strings.Contains(missing, "make tools") || !strings.Contains(missing, bin) {
		t.Fatalf("absent binary: fail %v, %q", fail, missing)
	}
	t.Setenv(RequireRealServersEnv, "1")
	if _, missing, fail := findVersityGW(root); !fail || !strings.Contains(missing, RequireRealServersEnv+"=1 requires it") {
		t.Fatalf("absent binary under %s=1: fail %v, %q", RequireRealServersEnv, fail, missing)
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, versityGWRelPath)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, versityGWRelPath), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, missing, fail := findVersityGW(root); fail || missing != "" || got != filepath.Join(root, versityGWRelPath) {
		t.Fatalf("present binary: %s, fail %v, %q", got, fail, missing)
	}
}
