package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// wal stands in for the streaming nodes' WALs that Milvus's broadcaster
// appends to: one append-only file per channel, each message written and
// fdatasync'ed under the channel's lock before the append returns, the
// durability a streaming node gives an append.
type wal struct {
	dir string
	mu  sync.Mutex
	chs map[string]*walFile
}

type walFile struct {
	mu     sync.Mutex
	f      *os.File
	offset uint64
}

func newWAL(dir string) (*wal, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal dir: %w", err)
	}
	return &wal{dir: dir, chs: map[string]*walFile{}}, nil
}

func (w *wal) file(ch string) (*walFile, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f := w.chs[ch]; f != nil {
		return f, nil
	}
	f, err := os.OpenFile(filepath.Join(w.dir, ch+".wal"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("wal %s: %w", ch, err)
	}
	wf := &walFile{f: f}
	w.chs[ch] = wf
	return wf, nil
}

// append writes one length-prefixed message and syncs it; it returns the
// message's offset in the channel.
func (w *wal) append(ch string, msg []byte) (uint64, error) {
	wf, err := w.file(ch)
	if err != nil {
		return 0, err
	}
	wf.mu.Lock()
	defer wf.mu.Unlock()
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(msg)), uint32(len(msg)))
	if _, err := wf.f.Write(append(buf, msg...)); err != nil {
		return 0, fmt.Errorf("wal %s: write: %w", ch, err)
	}
	if err := wf.f.Sync(); err != nil {
		return 0, fmt.Errorf("wal %s: sync: %w", ch, err)
	}
	wf.offset++
	return wf.offset, nil
}

func (w *wal) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.chs {
		f.f.Close()
	}
}
