package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/client"
)

var snapshotGroup = &group{
	name:    "snapshot",
	summary: "back up the state machine and check backups",
	cmds: []*command{
		{name: "save", args: "FILE", summary: "save a consistent snapshot from the leader into FILE, with a header and a SHA-256 (written to FILE.tmp, then renamed)", bind: bindSnapshotSave},
		{name: "inspect", args: "FILE", summary: "verify a backup's checksum and state, and show its position and its tables (offline)", bind: bindSnapshotInspect},
	},
}

func bindSnapshotSave(fs *flag.FlagSet) func([]string) (action, error) {
	force := fs.Bool("force", false, "overwrite FILE if it exists")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "FILE"); err != nil {
			return action{}, err
		}
		if args[0] == "" {
			return action{}, errors.New("FILE is empty")
		}
		file := args[0]
		return action{what: "snapshot save", run: func(ctx context.Context, e *env) error {
			return saveSnapshot(ctx, e, file, *force)
		}}, nil
	}
}

func bindSnapshotInspect(_ *flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "FILE"); err != nil {
			return action{}, err
		}
		if args[0] == "" {
			return action{}, errors.New("FILE is empty")
		}
		file := args[0]
		return action{what: "snapshot inspect", run: func(_ context.Context, e *env) error {
			return inspectSnapshot(e, file)
		}}, nil
	}
}

// saveSnapshot checks FILE before contacting the server, streams into
// FILE.tmp (header, state, checksum; synced), and renames it over FILE. On
// failure FILE is untouched and FILE.tmp is removed.
func saveSnapshot(ctx context.Context, e *env, file string, force bool) (err error) {
	if !force {
		if err := refuseExisting(file); err != nil {
			return err
		}
	}
	start := time.Now()
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var bw *backup.Writer
	info, err := e.c.SaveSnapshot(ctx, func(m client.BackupMeta) (io.Writer, error) {
		var err error
		bw, err = backup.NewWriter(f, backup.Header{ClusterID: m.ClusterID, LeaderID: m.LeaderID,
			Index: m.Index, Term: m.Term, CreatedUnixMs: time.Now().UnixMilli()})
		return bw, err
	})
	if err != nil {
		return err
	}
	hdr, sum, err := bw.Finish()
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if !force {
		if err := refuseExisting(file); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	syncDir(filepath.Dir(file))
	out := snapshotJSON{File: file, Bytes: int64(backup.HeaderSize) + int64(hdr.Size) + int64(len(sum)), StateBytes: hdr.Size,
		LeaderID: info.LeaderID, LeaderGRPCAddr: info.Endpoint, ClusterID: hdr.ClusterID, Index: hdr.Index, Term: hdr.Term,
		SHA256: fmt.Sprintf("%x", sum), Seconds: time.Since(start).Seconds()}
	return e.show(out, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "Saved snapshot to %s: index %d, term %d, cluster %s, %d bytes (state %d bytes) from leader %s at %s in %.2fs, SHA-256 %s.\n",
			file, out.Index, out.Term, out.ClusterID, out.Bytes, out.StateBytes, out.LeaderID, out.LeaderGRPCAddr, out.Seconds, out.SHA256)
		return err
	})
}

// inspectSnapshot verifies FILE (checksum, then a full decode of the state)
// and prints what it holds. It contacts no server.
func inspectSnapshot(e *env, file string) error {
	bf, err := backup.Open(file)
	if err != nil {
		return err
	}
	defer bf.Close()
	sum, err := backup.Summarize(bf.Body())
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if _, err := backup.Validate(bf.Body()); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	h := bf.Header
	out := inspectJSON{File: file, FormatVersion: h.FormatVersion, ClusterID: h.ClusterID, LeaderID: h.LeaderID,
		Index: h.Index, Term: h.Term, StateBytes: h.Size, SHA256: bf.SHA256, Checksum: "ok",
		Created: time.UnixMilli(h.CreatedUnixMs).UTC().Format(time.RFC3339), Tables: sum.Tables}
	return e.show(out, func(w io.Writer) error {
		fmt.Fprintf(w, "File:        %s\nFormat:      %d\nCluster ID:  %s\nLeader:      %s\nIndex:       %d\nTerm:        %d\nCreated:     %s\nState:       %d bytes\nSHA-256:     %s (ok)\n",
			file, out.FormatVersion, out.ClusterID, out.LeaderID, out.Index, out.Term, out.Created, out.StateBytes, out.SHA256)
		tw := newTable(w)
		fmt.Fprintln(tw, "TABLE\tRECORDS\tBYTES")
		for _, t := range sum.Tables {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", t.Name, t.Count, t.Bytes)
		}
		return tw.Flush()
	})
}

func refuseExisting(file string) error {
	if _, err := os.Lstat(file); err == nil {
		return fmt.Errorf("%s already exists (use --force to overwrite)", file)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// syncDir makes the rename durable; failure only weakens durability.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
