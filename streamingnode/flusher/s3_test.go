package flusher

import (
	"context"
	"fmt"
	"testing"

	"github.com/coordd/coordd/testutil"
)

// The flusher on a real S3 server (versitygw, testutil.StartS3Server):
// binlogs written as objects in the bucket and read back, and the
// takeover rounds' exactly-once check, with and without partial saves.

func s3URL(t *testing.T) string {
	t.Helper()
	s := testutil.StartS3Server(t, "binlogs")
	s.UseTestCredentials(t)
	return s.URL()
}

func TestFlushToS3(t *testing.T) {
	r := newRigWithStore(t, s3URL(t))
	r.coord.segment(10, 1, testP+"_1v0")
	r.insert(1, 10, 1, 2, 3)
	r.coord.flush(r.term, 10)
	r.waitFlushed(10)
	if got := r.persisted(); len(got) != 3 || got[1] != 1 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("persisted %v", got)
	}
	keys, err := r.store.List(context.Background(), "insert_log/1/0/10/")
	if err != nil || len(keys) != 1 {
		t.Fatalf("objects in the bucket: %v, %v", keys, err)
	}
}

func TestTakeoverExactlyOnceOnS3(t *testing.T) {
	for seed := int64(1); seed <= 2; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { takeoverExactlyOnce(t, seed, s3URL(t), nil) })
	}
	t.Run("partial-saves", func(t *testing.T) {
		takeoverExactlyOnce(t, 3, s3URL(t), func(c *Config) { c.SaveBytes = 4 * rowBytes })
	})
}
