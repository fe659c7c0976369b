package controllertest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sleepMarker is the comment a controller test puts on a time.Sleep that
// is not a wait for something to happen (a lock held a random while, an
// injected latency); every other wait goes through the fake clock or
// testutil.Eventually, which a loaded machine cannot outrun.
const sleepMarker = "// not a wait:"

// TestControllerTestsDoNotSleepToWait fails on a time.Sleep in any test of
// a controller package that is not marked with sleepMarker.
func TestControllerTestsDoNotSleepToWait(t *testing.T) {
	var bad []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, "_test.go") || strings.HasSuffix(path, "nosleep_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "time.Sleep(") && !strings.Contains(line, sleepMarker) {
				bad = append(bad, filepath.ToSlash(path)+":"+strconv.Itoa(i+1)+": "+strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("time.Sleep in a controller test (advance the fake clock or use testutil.Eventually; mark a deliberate hold %q): %s", sleepMarker, b)
	}
}
