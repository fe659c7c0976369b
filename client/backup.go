package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordd/coordd/api/coordpb"
)

// BackupMeta is the position of the state a backup holds.
type BackupMeta struct {
	ClusterID string
	LeaderID  string
	Index     uint64 // raft index of the last command in the state
	Term      uint64
}

// SaveSnapshot streams a backup of the state machine from the leader (at a
// linearizable point). begin is called once, with the state's position,
// and returns where the snapshot bytes go. The stream must end with the
// leader's size and SHA-256 of the bytes, and they must match what was
// written: a truncated or damaged stream is an error. Like Snapshot, a
// failure before begin was called is retried.
func (c *Client) SaveSnapshot(ctx context.Context, begin func(BackupMeta) (io.Writer, error)) (SnapshotInfo, error) {
	var info SnapshotInfo
	delay := backoffStart
	for attempts := 1; ; attempts++ {
		st, err := c.findLeader(ctx)
		if err != nil {
			return info, err
		}
		info.LeaderID, info.Endpoint = st.GetLeaderId(), st.GetLeaderGrpcAddr()
		started, n, err := c.streamBackup(ctx, info.Endpoint, begin)
		info.Bytes = n
		if err == nil {
			c.setPreferred(info.Endpoint)
			return info, nil
		}
		e := &Error{Op: "SaveSnapshot", Endpoint: info.Endpoint, Attempts: attempts, LeaderID: info.LeaderID, Err: err}
		if ctx.Err() != nil {
			e.Stopped = ctx.Err()
			return info, e
		}
		if retry, _ := classify(err, nil, false); !retry || started {
			return info, e
		}
		if attempts > c.cfg.MaxRetries {
			e.Stopped = errRetryBudget
			return info, e
		}
		if err := sleep(ctx, delay); err != nil {
			e.Stopped = err
			return info, e
		}
		delay = min(2*delay, backoffCap)
	}
}

// streamBackup runs one SaveSnapshot stream from addr. started reports
// whether begin was called (after which the call cannot be retried).
func (c *Client) streamBackup(ctx context.Context, addr string, begin func(BackupMeta) (io.Writer, error)) (started bool, n int64, err error) {
	cc, err := c.conn(addr)
	if err != nil {
		return false, 0, err
	}
	if err := c.waitReady(ctx, addr, cc); err != nil {
		return false, 0, err
	}
	idle := c.cfg.RequestTimeout
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := time.AfterFunc(idle, func() { cancel(errStalled) })
	defer timer.Stop()
	stalled := func(err error) error {
		if errors.Is(context.Cause(ctx), errStalled) {
			return status.Errorf(codes.DeadlineExceeded, "no snapshot data from %s for %v", addr, idle)
		}
		return err
	}
	stream, err := coordpb.NewBackupClient(cc).SaveSnapshot(ctx, &coordpb.SaveSnapshotRequest{})
	if err != nil {
		return false, 0, stalled(err)
	}
	var w io.Writer
	sum := sha256.New()
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return started, n, fmt.Errorf("the snapshot stream from %s ended without its end marker after %d bytes", addr, n)
		}
		if err != nil {
			return started, n, stalled(err)
		}
		timer.Reset(idle)
		switch p := msg.GetPart().(type) {
		case *coordpb.SaveSnapshotChunk_Meta:
			if started {
				return started, n, errors.New("the snapshot stream sent its meta twice")
			}
			started = true
			m := p.Meta
			if w, err = begin(BackupMeta{ClusterID: m.GetClusterId(), LeaderID: m.GetLeaderId(), Index: m.GetIndex(), Term: m.GetTerm()}); err != nil {
				return started, n, err
			}
		case *coordpb.SaveSnapshotChunk_Data:
			if w == nil {
				return started, n, errors.New("the snapshot stream sent data before its meta")
			}
			k, err := w.Write(p.Data)
			n += int64(k)
			sum.Write(p.Data[:k])
			if err != nil {
				return started, n, fmt.Errorf("write snapshot: %w", err)
			}
		case *coordpb.SaveSnapshotChunk_End:
			if w == nil {
				return started, n, errors.New("the snapshot stream ended before its meta")
			}
			if p.End.GetSize() != uint64(n) || !bytes.Equal(p.End.GetSha256(), sum.Sum(nil)) {
				return started, n, fmt.Errorf("the snapshot received (%d bytes, SHA-256 %x) is not what the leader sent (%d bytes, SHA-256 %x)",
					n, sum.Sum(nil), p.End.GetSize(), p.End.GetSha256())
			}
			return started, n, nil
		default:
			return started, n, fmt.Errorf("the snapshot stream sent an unknown part %T (newer server?)", p)
		}
	}
}
