package broadcaster

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/fsm"
	"github.com/coordd/coordd/vocab"
)

// A CreateCollection's callback records its targets as the collection's
// VChannels, and refuses when the collection already has others. Two
// CreateCollections of one collection with different targets would both
// be accepted while neither has completed (Apply checks the targets
// against the collection's VChannels, which neither has recorded yet);
// the second to complete would then fail its callback for ever while
// holding its keys, the shared Cluster key among them, and every
// exclusive-Cluster broadcast would wait behind it
// (docs/semantics.md#broadcast-lifecycle). So the broadcaster admits a
// CreateCollection only against the pending CreateCollections of its
// collection: one without targets of its own takes theirs, one with
// other targets is refused (REJECT_CONFLICT). Admissions of one
// collection are serialised from the state they are decided on until
// their CreateBroadcast is committed (or known not to be), so two of them
// cannot both be decided before either is in the state. A leader's
// proposals are fenced by its term, so a new leader's admissions see every
// create an earlier one got committed.

// collectionAdmissions serialises the admission of CreateCollection
// broadcasts per collection ID, for one leadership.
type collectionAdmissions struct {
	mu   sync.Mutex
	busy map[int64]chan struct{} // closed when the admission ends
}

func newCollectionAdmissions() *collectionAdmissions {
	return &collectionAdmissions{busy: map[int64]chan struct{}{}}
}

// admit waits, within ctx, until no other admission of req's collection is
// in progress and starts req's; release ends it. A request that is not a
// CreateCollection (or whose payload does not parse: prepare refuses it)
// needs no admission.
func (a *collectionAdmissions) admit(ctx context.Context, req Request) (release func(), err error) {
	coll, ok := createCollectionID(req.MessageType, req.Payload)
	if !ok {
		return func() {}, nil
	}
	for {
		a.mu.Lock()
		ch, busy := a.busy[coll]
		if !busy {
			ch = make(chan struct{})
			a.busy[coll] = ch
			a.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					a.mu.Lock()
					delete(a.busy, coll)
					a.mu.Unlock()
					close(ch)
				})
			}, nil
		}
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("waited for another CreateCollection of collection %d to be admitted: %w", coll, ctx.Err())
		}
	}
}

// createCollectionID is the collection of a CreateCollection broadcast.
func createCollectionID(msgType string, payload []byte) (int64, bool) {
	if msgType != vocab.MsgCreateCollection {
		return 0, false
	}
	var p logpb.CreateCollectionPayload
	if err := proto.Unmarshal(payload, &p); err != nil {
		return 0, false
	}
	return p.CollectionId, true
}

// pendingCollectionCreate returns a PENDING CreateCollection task of
// collection coll on st, if there is one (the lowest ID: admission keeps
// them to one target set, so any one answers for all).
func pendingCollectionCreate(st *fsm.State, coll int64) (*logpb.BroadcastTask, bool) {
	for _, bt := range st.PendingBroadcasts() {
		if id, ok := createCollectionID(bt.MessageType, bt.Payload); ok && id == coll {
			return bt, true
		}
	}
	return nil, false
}

// followPendingCreate returns the targets of a pending CreateCollection of
// collection coll (without the CChannel), for a CreateCollection that names
// none: it joins that one instead of planning another placement. A pending
// one with another shard count is a conflict. ok is false when there is
// none.
func followPendingCreate(st *fsm.State, coll int64, shards uint32) (targets []string, ok bool, err error) {
	bt, ok := pendingCollectionCreate(st, coll)
	if !ok {
		return nil, false, nil
	}
	var p logpb.CreateCollectionPayload
	_ = proto.Unmarshal(bt.Payload, &p) // it parsed when it was admitted
	if p.Shards != shards {
		return nil, true, &commands.RejectedError{Code: logpb.RejectCode_REJECT_CONFLICT, Message: fmt.Sprintf(
			"collection %d has a pending CreateCollection (broadcast %d) with %d shards, not %d", coll, bt.Id, p.Shards, shards)}
	}
	return withoutCChannel(st, bt.Vchannels), true, nil
}

// checkPendingCreate refuses a CreateCollection whose targets differ from
// those of a pending CreateCollection of its collection: its callback
// could never succeed once that one's has run.
func checkPendingCreate(st *fsm.State, body *logpb.CreateBroadcast) error {
	coll, ok := createCollectionID(body.MessageType, body.Payload)
	if !ok {
		return nil
	}
	bt, ok := pendingCollectionCreate(st, coll)
	if !ok {
		return nil
	}
	mine, theirs := withoutCChannel(st, body.Vchannels), withoutCChannel(st, bt.Vchannels)
	if sameTargets(mine, theirs) {
		return nil
	}
	return &commands.RejectedError{Code: logpb.RejectCode_REJECT_CONFLICT, Message: fmt.Sprintf(
		"collection %d has a pending CreateCollection (broadcast %d) to %v; another CreateCollection of it must target "+
			"the same vchannels (or none, to follow it), not %v", coll, bt.Id, theirs, mine)}
}

// withoutCChannel is targets without the CChannel.
func withoutCChannel(st *fsm.State, targets []string) []string {
	cch := st.CChannel()
	out := make([]string, 0, len(targets))
	for _, v := range targets {
		if v != cch {
			out = append(out, v)
		}
	}
	return out
}

func sameTargets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := make(map[string]bool, len(a))
	for _, v := range a {
		in[v] = true
	}
	for _, v := range b {
		if !in[v] {
			return false
		}
	}
	return true
}
