package raftnode

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// TestAppendErrorIsRemembered: a failed append is reported (with the time
// failures began) until an append succeeds again.
func TestAppendErrorIsRemembered(t *testing.T) {
	inner := raft.NewInmemStore()
	fail := errors.New("file too large")
	s := &watchedLogStore{LogStore: &failingStore{LogStore: inner, err: fail}}
	n := &Node{logs: s}
	if _, err := n.AppendError(); err != nil {
		t.Fatalf("fresh store reports %v", err)
	}
	if err := s.StoreLogs([]*raft.Log{{Index: 1}}); !errors.Is(err, fail) {
		t.Fatalf("StoreLogs: %v", err)
	}
	since, err := n.AppendError()
	if !errors.Is(err, fail) || !strings.Contains(err.Error(), "cannot append to its raft log") || since.IsZero() {
		t.Fatalf("after a failure: %v since %v", err, since)
	}
	s.StoreLog(&raft.Log{Index: 1})
	if again, _ := n.AppendError(); !again.Equal(since) {
		t.Fatalf("a second failure moved the start of the failures from %v to %v", since, again)
	}
	s.LogStore.(*failingStore).err = nil
	if err := s.StoreLogs([]*raft.Log{{Index: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.AppendError(); err != nil {
		t.Fatalf("after a successful append: %v", err)
	}
}

type failingStore struct {
	raft.LogStore
	err error
}

func (f *failingStore) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f *failingStore) StoreLogs(ls []*raft.Log) error {
	if f.err != nil {
		return f.err
	}
	return f.LogStore.StoreLogs(ls)
}
