package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// etcdCluster is a 3-member etcd on 127.0.0.1 (client ports base..base+2,
// peer ports base+10..base+12), data under dir, started and stopped by PID.
type etcdCluster struct {
	clientAddrs []string
	procs       []*exec.Cmd
}

func startEtcd(binary, dir string, base int) (*etcdCluster, error) {
	e := &etcdCluster{}
	var initial []string
	for i := range 3 {
		e.clientAddrs = append(e.clientAddrs, fmt.Sprintf("127.0.0.1:%d", base+i))
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, base+10+i))
	}
	for i := range 3 {
		d := filepath.Join(dir, fmt.Sprintf("etcd-m%d", i))
		logf, err := os.Create(d + ".log")
		if err != nil {
			e.stop()
			return nil, err
		}
		cmd := exec.Command(binary, "--name", fmt.Sprintf("m%d", i), "--data-dir", d,
			"--listen-client-urls", "http://"+e.clientAddrs[i], "--advertise-client-urls", "http://"+e.clientAddrs[i],
			"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", base+10+i),
			"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", base+10+i),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", fmt.Sprintf("coordbench-%d", os.Getpid()), "--log-level", "error")
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			e.stop()
			return nil, fmt.Errorf("start etcd: %w", err)
		}
		logf.Close()
		e.procs = append(e.procs, cmd)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := e.leader(); err == nil {
			return e, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	e.stop()
	return nil, fmt.Errorf("etcd cluster not healthy within 30 s (logs in %s)", dir)
}

// leader returns the client address of the member that is the leader,
// asked through etcd's JSON gateway.
func (e *etcdCluster) leader() (string, error) {
	c := &http.Client{Timeout: time.Second}
	for _, a := range e.clientAddrs {
		resp, err := c.Post("http://"+a+"/v3/maintenance/status", "application/json", bytes.NewReader([]byte("{}")))
		if err != nil {
			continue
		}
		var st struct {
			Header struct {
				MemberID string `json:"member_id"`
			} `json:"header"`
			Leader string `json:"leader"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err == nil && st.Leader != "" && st.Leader == st.Header.MemberID {
			return a, nil
		}
	}
	return "", fmt.Errorf("no etcd leader")
}

func (e *etcdCluster) pids() map[string]int {
	out := map[string]int{}
	for i, p := range e.procs {
		out[fmt.Sprintf("etcd-m%d", i)] = p.Process.Pid
	}
	return out
}

// stop: SIGTERM, then SIGKILL after 2 s (the data is thrown away).
func (e *etcdCluster) stop() {
	for _, p := range e.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() {
		for _, p := range e.procs {
			_ = p.Wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		for _, p := range e.procs {
			_ = p.Process.Kill()
		}
		<-done
	}
}
