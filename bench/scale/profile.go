package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// Profiles of the members under load (-profile DIR): each load row takes
// one CPU profile of every running member, over the middle half of the
// row, and a heap profile at its end, so a row's figures come with the
// profile that explains them (go tool pprof -top DIR/<file>). The members
// serve them because -profile adds --enable-pprof to their flags.

// profileRow collects the row's profiles into dir; it returns at once and
// the returned function waits for the collection to end.
func (e *env) profileRow(ctx context.Context, dir, row string, d time.Duration) func() {
	if dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d / 4):
		}
		secs := max(1, int((d / 2).Seconds()))
		finished := make(chan struct{})
		members := e.running()
		for _, m := range members {
			go func() {
				defer func() { finished <- struct{}{} }()
				role := "follower"
				if mt, err := m.metrics(); err == nil && mt["coordd_is_leader"] == 1 {
					role = "leader"
				}
				name := fmt.Sprintf("%s-%s-%s", row, m.id, role)
				if err := fetchProfile(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", m.httpAddr, secs),
					filepath.Join(dir, name+"-cpu.pb.gz"), time.Duration(secs+30)*time.Second); err != nil {
					fmt.Printf("    profile %s: %v\n", name, err)
				}
				if err := fetchProfile(ctx, "http://"+m.httpAddr+"/debug/pprof/heap",
					filepath.Join(dir, name+"-heap.pb.gz"), 30*time.Second); err != nil {
					fmt.Printf("    heap profile %s: %v\n", name, err)
				}
			}()
		}
		for range members {
			<-finished
		}
	}()
	return func() { <-done }
}

// fetchProfile writes what url answers into path.
func fetchProfile(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fetch %s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}
