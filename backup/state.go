package backup

import (
	"bufio"
	"fmt"
	"os"

	"github.com/coordd/coordd/fsm"
)

// WriteState writes st into a new backup file at path under header h (the
// input of `coordd restore`) and returns the file's size. It is how states
// built offline (fsm.Synthetic, for make bench-scale and the Jepsen-style
// scale templates) become backups.
func WriteState(path string, st *fsm.State, h Header) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("create backup %s: %w", path, err)
	}
	defer f.Close()
	w, err := NewWriter(f, h)
	if err != nil {
		return 0, fmt.Errorf("start backup %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := st.WriteSnapshot(bw); err != nil {
		return 0, fmt.Errorf("write the state into %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write the state into %s: %w", path, err)
	}
	if _, _, err := w.Finish(); err != nil {
		return 0, fmt.Errorf("finish backup %s: %w", path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("backup %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("close backup %s: %w", path, err)
	}
	return fi.Size(), nil
}
