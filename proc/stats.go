package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A process's resources as Linux's /proc reports them, read the same way
// by every benchmark and launcher (bench/coordbench, bench/scale).

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// statFields are the fields of /proc/PID/stat after the command name
// (field 2, which may itself hold spaces or parentheses), so index 0 is
// field 3 (the state).
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// CPUSeconds is pid's user plus system CPU time.
func CPUSeconds(pid int) (float64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return (ut + st) / clockTicks, nil
}

// Stopped reports whether pid is stopped (state T or t).
func Stopped(pid int) (bool, error) {
	f, err := statFields(pid)
	if err != nil {
		return false, err
	}
	return len(f) > 0 && (f[0] == "T" || f[0] == "t"), nil
}

// RSSBytes is pid's resident set (VmRSS in /proc/PID/status).
func RSSBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if f := strings.Fields(ln); len(f) == 3 && f[0] == "VmRSS:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/%d/status: VmRSS %q", pid, f[1])
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// LoadAvg is /proc/loadavg's first three fields ("0.52 0.61 0.70"), or
// "?" where it cannot be read.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
