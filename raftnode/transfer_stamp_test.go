package raftnode

import (
	"bytes"
	"testing"
)

// TestTransferStamp: a stamped header ID gives back the member ID and the
// term; an unstamped or malformed one is not a stamp.
func TestTransferStamp(t *testing.T) {
	if m, term, ok := parseTransferStamp(stampTransfer([]byte("n1"), 7)); !ok || term != 7 || !bytes.Equal(m, []byte("n1")) {
		t.Fatalf("round trip: %q %d %v", m, term, ok)
	}
	for _, id := range []string{"n1", "", "n1" + transferStampSep, "n1" + transferStampSep + "x", "n1" + transferStampSep + "0", "n1" + transferStampSep + "-3"} {
		if _, _, ok := parseTransferStamp([]byte(id)); ok {
			t.Errorf("%q parsed as a stamp", id)
		}
	}
}

// FuzzTransferStamp: parsing never panics, and every stamp parses back.
func FuzzTransferStamp(f *testing.F) {
	f.Add([]byte("n1"), uint64(3))
	f.Fuzz(func(t *testing.T, id []byte, term uint64) {
		parseTransferStamp(id)
		if bytes.Contains(id, []byte(transferStampSep)) || term == 0 {
			return
		}
		if m, got, ok := parseTransferStamp(stampTransfer(id, term)); !ok || got != term || !bytes.Equal(m, id) {
			t.Fatalf("stamp %q/%d parsed as %q/%d/%v", id, term, m, got, ok)
		}
	})
}
