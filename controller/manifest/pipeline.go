package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// maxAttempts bounds the attempts of one commit: the first, and the
// transparent retries of an attempt built on a tail that did not apply
// (docs/semantics.md#manifest-pipelining).
const maxAttempts = 3

// member is one segment's share of an attempt (one for Commit, one per
// live member for CommitBatch).
type member struct {
	id  int64
	b   basis
	pub *logpb.ManifestPublish
	nt  *tail // the tail its publication makes (nil: none new)
}

// lockRelease releases an attempt's locks exactly once: when the
// proposal is queued (commands.OnQueued), or when Propose returns
// without having said so (an error before queueing, or a Leader that
// does not call the hook), or when the attempt ends before proposing.
type lockRelease struct {
	c      *Committer
	once   sync.Once
	unlock func()
	held   time.Time
}

func (c *Committer) holding(unlock func()) *lockRelease {
	return &lockRelease{c: c, unlock: unlock, held: c.clock.Now()}
}

// release runs before (under the locks, if they are still held), then
// unlocks; only its first call does anything.
func (r *lockRelease) release(before func()) {
	r.once.Do(func() {
		if before != nil {
			before()
		}
		r.unlock()
		r.c.cfg.Metrics.lockHold(r.c.clock.Since(r.held))
	})
}

// bases starts an attempt on segments ids in term (their locks held):
// the applied state to check against and, per segment, its pending tail,
// unless the orphan collector retired the tail's version (it can never
// publish: build on the applied state instead).
func (c *Committer) bases(ids []int64, term uint64) (*fsm.State, []basis) {
	st, bs := c.tails.begin(ids, term, c.leader.State)
	for i := range bs {
		if b := &bs[i]; b.onTail && b.tail.ptr.Version <= st.ManifestRetired(b.tail.ptr.Base) {
			b.onTail, b.tail, b.lineage = false, nil, b.seq
		}
	}
	return st, bs
}

// proposeMembers proposes the members' publications as one command and
// releases rel (the members' locks) as soon as it is queued, recording
// each member's new tail under the locks: the next commit on a member
// then builds on it, and is queued, so ordered in the log, after this
// one. Once the answer is in, each member's tail is settled (applied),
// dropped with its chain (refused) or left as it is (outcome unknown).
// retry is set when Apply refused the command as stale while a member was
// built on a tail.
func (c *Committer) proposeMembers(ctx context.Context, term uint64, requestID string, attempt int, ms []*member, rel *lockRelease) (out []*coordpb.CommitSegmentManifestResponse, retry string, err error) {
	pubs := make([]*logpb.ManifestPublish, len(ms))
	pipelined := false
	for i, m := range ms {
		pubs[i] = m.pub
		if m.nt != nil {
			m.nt.term = term
		}
		pipelined = pipelined || m.b.onTail
	}
	var queued atomic.Bool
	onQueued := func() {
		rel.release(func() {
			queued.Store(true)
			for _, m := range ms {
				c.tails.queued(m.id, m.b, m.nt)
			}
		})
	}
	if pipelined {
		c.cfg.Metrics.pipelined()
	}
	out, rej, err := c.propose(ctx, term, requestID, attemptRequestID(requestID, attempt), pubs, onQueued)
	for i, m := range ms {
		o := unknown
		switch {
		case rej != nil:
			o = refused
		case err == nil && m.nt != nil && (i >= len(out) || out[i].Version != m.nt.ptr.Version):
			o = refused // answered by another attempt's result (request ID)
		case err == nil:
			o = applied
		}
		c.tails.finish(m.id, m.b, queued.Load(), o, m.nt)
	}
	rel.release(nil)
	if rej != nil && err != nil && pipelined && rej.Code == logpb.RejectCode_REJECT_STALE {
		if _, _, _, ok := vocab.ParseStaleManifest(rej.Message); ok {
			retry = retryReason(rej.Message)
		}
	}
	return out, retry, err
}

// retryReason labels a retried attempt by Apply's refusal (metrics).
func retryReason(msg string) string {
	switch {
	case strings.Contains(msg, "retired by the orphan collector"):
		return "retired"
	case strings.Contains(msg, "expected manifest differs"):
		return "expected_version"
	}
	return "base_moved"
}

// attemptRequestID is the request ID attempt n of a commit proposes with.
// The first attempt uses the caller's; a retry needs its own, since the
// FSM records the refused attempt's rejection under the caller's ID. It
// is derived, so a caller's repeat of the request finds a retry's result
// (Committer.recorded looks up every attempt's ID), and it cannot be
// confused with a client's ID by accident (a control character).
func attemptRequestID(requestID string, n int) string {
	if requestID == "" || n <= 1 {
		return requestID
	}
	suffix := fmt.Sprintf("\x1fretry-%d", n)
	if len(requestID)+len(suffix) > vocab.MaxRequestIDBytes {
		sum := sha256.Sum256([]byte(requestID))
		requestID = "\x1fsha256-" + hex.EncodeToString(sum[:])
	}
	return requestID + suffix
}
