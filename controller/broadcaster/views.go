package broadcaster

import (
	"strings"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
)

// The broadcaster's answers in the public API's terms: the API adapts
// them and never reads the log's records itself.

// Response is r as a Broadcast response.
func (r Result) Response() *coordpb.BroadcastResponse {
	out := &coordpb.BroadcastResponse{BroadcastId: r.BroadcastID, Duplicated: r.Duplicated, LockWaitMs: r.LockWait.Milliseconds()}
	for _, cp := range r.Checkpoints {
		out.AppendResults = append(out.AppendResults, apiCheckpoint(cp))
	}
	return out
}

func apiCheckpoint(cp *logpb.VChannelCheckpoint) *coordpb.Checkpoint {
	return &coordpb.Checkpoint{Vchannel: cp.Vchannel, Term: cp.Term, Offset: cp.Offset, TimeTick: cp.TimeTick}
}

// Info is task id of st as the API shows it (false: st holds no such task).
func Info(st *fsm.State, id uint64) (*coordpb.BroadcastInfo, bool) {
	t, ok := st.BroadcastTask(id)
	if !ok {
		return nil, false
	}
	return info(t), true
}

// Infos are the newest tasks of st (all, or the pending ones), at most
// limit, as the API shows them, oldest first.
func Infos(st *fsm.State, pendingOnly bool, limit int) []*coordpb.BroadcastInfo {
	tasks := st.BroadcastTasks()
	if pendingOnly {
		tasks = st.PendingBroadcasts()
	}
	if len(tasks) > limit {
		tasks = tasks[len(tasks)-limit:] // the newest
	}
	out := make([]*coordpb.BroadcastInfo, 0, len(tasks))
	for _, t := range tasks {
		out = append(out, info(t))
	}
	return out
}

func info(t *logpb.BroadcastTask) *coordpb.BroadcastInfo {
	out := &coordpb.BroadcastInfo{
		BroadcastId: t.Id, MessageType: t.MessageType, State: strings.TrimPrefix(t.State.String(), "BROADCAST_"),
		Vchannels: t.Vchannels, AckSyncUp: t.AckSyncUp, IdempotencyKey: t.IdempotencyKey, CreatedUnixMs: t.CreatedMs,
		TombstonedUnixMs: t.TombstonedMs, CallbackAttempts: t.CallbackAttempts, LastError: t.LastError,
		AbandonedReason: t.AbandonedReason, PayloadBytes: uint32(len(t.Payload)),
	}
	for _, k := range t.ResourceKeys {
		out.ResourceKeys = append(out.ResourceKeys, &coordpb.ResourceKey{Domain: domainName(k.Domain), Key: k.Key, Shared: k.Shared})
	}
	for _, cp := range t.Acked {
		out.Acked = append(out.Acked, apiCheckpoint(cp))
	}
	return out
}

// domainName is the API name of a log domain (the inverse of NewRequest's
// reading); a number the log does not define is shown as the enum does.
func domainName(d logpb.ResourceDomain) string {
	if v := commands.ResourceDomainOf(d); v != "" {
		if _, ok := commands.LogResourceDomain(v); ok {
			return string(v)
		}
	}
	return d.String()
}

// KeyHold is a resource key a pending task holds against a request.
type KeyHold struct {
	Key         string // as KeyName writes it
	Task        uint64
	MessageType string
}

// HeldKey returns a key of c that a pending task of st holds in a mode
// that excludes c's (an exclusive hold, or an exclusive request), for a
// caller that refuses instead of waiting (Milvus's StreamingCoord).
func HeldKey(st *fsm.State, c Checked) (KeyHold, bool) {
	for _, t := range st.PendingBroadcasts() {
		for _, held := range t.ResourceKeys {
			for _, k := range c.req.ResourceKeys {
				if held.Domain == k.Domain && held.Key == k.Key && (!held.Shared || !k.Shared) {
					return KeyHold{Key: KeyName(k), Task: t.Id, MessageType: t.MessageType}, true
				}
			}
		}
	}
	return KeyHold{}, false
}
