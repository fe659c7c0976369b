package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/coordd/coordd/client"
)

var snapshotGroup = &group{
	name:    "snapshot",
	summary: "back up the state machine",
	cmds: []*command{
		{name: "save", args: "FILE", summary: "stream a snapshot from the leader into FILE (written to FILE.tmp, then renamed)", bind: bindSnapshotSave},
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

// saveSnapshot checks FILE before contacting the server, streams into
// FILE.tmp, syncs it and renames it over FILE. On failure FILE is untouched
// and FILE.tmp is removed.
func saveSnapshot(ctx context.Context, e *env, file string, force bool) (err error) {
	if !force {
		if err := refuseExisting(file); err != nil {
			return err
		}
	}
	tmp := file + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	info, err := e.c.Snapshot(ctx, bw)
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
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
	return printSnapshot(e, file, info)
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

func printSnapshot(e *env, file string, info client.SnapshotInfo) error {
	if e.json {
		return writeJSON(e.out, snapshotJSON{File: file, Bytes: info.Bytes, LeaderID: info.LeaderID, LeaderGRPCAddr: info.Endpoint})
	}
	_, err := fmt.Fprintf(e.out, "Saved snapshot to %s (%d bytes from leader %s at %s).\n", file, info.Bytes, info.LeaderID, info.Endpoint)
	return err
}
