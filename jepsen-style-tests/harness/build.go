package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Binaries are the programs a run starts.
type Binaries struct {
	Coordd string
}

var (
	buildOnce sync.Once
	buildDir  string
	built     Binaries
	buildErr  error
)

// Build compiles coordd once per test process into a temporary directory
// (go build -tags hashicorpmetrics, plus JEPSEN_TAGS, e.g. a test-only
// broken-server tag; JEPSEN_RACE=1 adds -race). JEPSEN_COORDD_BIN skips the
// build and uses that binary. Call Cleanup from TestMain to remove the
// directory.
func Build() (Binaries, error) {
	buildOnce.Do(func() {
		if bin := os.Getenv("JEPSEN_COORDD_BIN"); bin != "" {
			built.Coordd = bin
			return
		}
		buildDir, buildErr = os.MkdirTemp("", "coordd-jepsen-bin-")
		if buildErr != nil {
			return
		}
		tags := "hashicorpmetrics"
		if extra := os.Getenv("JEPSEN_TAGS"); extra != "" {
			tags += "," + extra
		}
		args := []string{"build", "-tags", tags}
		if os.Getenv("JEPSEN_RACE") == "1" {
			args = append(args, "-race")
		}
		out := filepath.Join(buildDir, "coordd")
		args = append(args, "-o", out, "github.com/coordd/coordd/cmd/coordd")
		cmd := exec.Command("go", args...)
		if b, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go %v: %v\n%s", args, err, b)
			return
		}
		built.Coordd = out
	})
	return built, buildErr
}

// Cleanup removes the build directory.
func Cleanup() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}
