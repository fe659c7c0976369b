package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// cpuProfile fetches a CPU profile of d (whole seconds, at least one) from
// addr's /debug/pprof/profile and writes it to path; a failure is only
// reported (the profile is a diagnostic, not a result).
func cpuProfile(addr string, d time.Duration, path string) {
	secs := max(1, int(d.Seconds()))
	c := &http.Client{Timeout: d + 30*time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("HTTP %s", resp.Status)
		resp.Body.Close()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "coordbench: profile of %s: %v\n", addr, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "coordbench: profile %s: %v\n", path, err)
	}
}
