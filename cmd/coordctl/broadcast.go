package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

var broadcastGroup = &group{
	name:    "broadcast",
	summary: "send DDL/DCL broadcasts to many vchannels and inspect, retry or abandon broadcast tasks",
	cmds: []*command{
		{name: "send", args: "TYPE", summary: "broadcast a message of TYPE and wait until every target acked it and its callback ran", bind: bindBroadcastSend},
		{name: "get", args: "ID", summary: "show one broadcast task: state, targets and their acks, callback attempts", bind: bindBroadcastGet},
		{name: "list", summary: "list the newest broadcast tasks (--pending skips finished ones)", bind: bindBroadcastList},
		{name: "retry", args: "ID", summary: "retry a pending task's appends and callback now", bind: bindBroadcastRetry},
		{name: "abandon", args: "ID", summary: "give up on a pending task (--reason required): no callback, its resource keys are released", bind: bindBroadcastAbandon},
	},
}

// listFlag is a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func bindBroadcastSend(fs *flag.FlagSet) func([]string) (action, error) {
	payloadHex := fs.String("payload-hex", "", "the payload as `HEX` bytes")
	collID := fs.Int64("collection-id", 0, "CreateCollection/DropCollection: build the payload for collection `N`")
	shards := fs.Uint("shards", 0, "CreateCollection: build the payload with `S` shards (vchannels)")
	var keys, vchannels listFlag
	fs.Var(&keys, "key", "lock resource key `DOMAIN:KEY[:shared]` (repeatable); DOMAIN: "+
		strings.Join(client.ResourceDomains(), ", ")+"; append :exclusive to a key that ends in :shared")
	fs.Var(&vchannels, "vchannel", "target `V` (repeatable; default: a CreateCollection's vchannels, else every pchannel)")
	ackSyncUp := fs.Bool("ack-sync-up", false, "streaming nodes ack the message themselves once persisted")
	idem := fs.String("idempotency", "", "idempotency key `SCOPE:ID:KEY`: a repeat returns the same task; SCOPE: CLUSTER (ID 0), DATABASE or COLLECTION (ID: its ID)")
	return func(args []string) (action, error) {
		if err := wantArgs(args, 1, 1, "TYPE"); err != nil {
			return action{}, err
		}
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		spec := client.BroadcastSpec{MessageType: args[0], AckSyncUp: *ackSyncUp, VChannels: append([]string(nil), vchannels...)}
		if err := trimInvalid(vocab.ValidateMessageType(spec.MessageType)); err != nil {
			return action{}, fmt.Errorf("TYPE: %v", err)
		}
		payload, err := sendPayload(spec.MessageType, set, *payloadHex, *collID, *shards)
		if err != nil {
			return action{}, err
		}
		spec.Payload = payload
		for _, k := range keys {
			rk, err := parseResourceKey(k)
			if err != nil {
				return action{}, err
			}
			spec.ResourceKeys = append(spec.ResourceKeys, rk)
		}
		if set["idempotency"] {
			ik, err := parseIdempotency(*idem)
			if err != nil {
				return action{}, err
			}
			spec.Idempotency = ik
		}
		if err := spec.Validate(); err != nil {
			return action{}, err
		}
		return action{what: "broadcast send", mutates: true, run: func(ctx context.Context, e *env) error {
			resp, err := e.c.Broadcast(ctx, spec)
			if err != nil {
				return err
			}
			return printBroadcastSent(e, spec.MessageType, resp)
		}}, nil
	}
}

// sendPayload is the payload from --payload-hex or, for CreateCollection
// and DropCollection, from --collection-id/--shards. Built-in types'
// payloads are checked as the server's callbacks will read them.
func sendPayload(typ string, set map[string]bool, payloadHex string, collID int64, shards uint) ([]byte, error) {
	built := set["collection-id"] || set["shards"]
	if set["payload-hex"] && built {
		return nil, errors.New("give either --payload-hex or --collection-id/--shards, not both")
	}
	if built {
		switch {
		case typ != vocab.MsgCreateCollection && typ != vocab.MsgDropCollection:
			return nil, fmt.Errorf("--collection-id and --shards build %s and %s payloads; use --payload-hex for %s",
				vocab.MsgCreateCollection, vocab.MsgDropCollection, typ)
		case !set["collection-id"]:
			return nil, fmt.Errorf("%s needs --collection-id", typ)
		case typ == vocab.MsgCreateCollection && !set["shards"]:
			return nil, fmt.Errorf("%s needs --shards", typ)
		case typ == vocab.MsgDropCollection && set["shards"]:
			return nil, fmt.Errorf("%s takes no --shards", typ)
		}
		if collID <= 0 {
			return nil, fmt.Errorf("--collection-id must be a positive integer, got %d", collID)
		}
		if typ == vocab.MsgDropCollection {
			return client.DropCollectionPayload(collID), nil
		}
		if shards == 0 || shards > vocab.MaxVChannelsPerColl {
			return nil, fmt.Errorf("--shards must be in 1..%d, got %d", vocab.MaxVChannelsPerColl, shards)
		}
		return client.CreateCollectionPayload(collID, uint32(shards)), nil
	}
	payload, err := hex.DecodeString(payloadHex)
	if err != nil {
		return nil, fmt.Errorf("--payload-hex: %v", err)
	}
	if len(payload) > vocab.MaxBroadcastPayload {
		return nil, fmt.Errorf("payload is %d bytes (max %d)", len(payload), vocab.MaxBroadcastPayload)
	}
	switch typ {
	case vocab.MsgCreateCollection:
		var p logpb.CreateCollectionPayload
		if !set["payload-hex"] {
			return nil, fmt.Errorf("%s needs --collection-id and --shards (or --payload-hex)", typ)
		}
		if err := proto.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("--payload-hex is not a CreateCollectionPayload: %v", err)
		}
		if p.CollectionId <= 0 || p.Shards == 0 || p.Shards > vocab.MaxVChannelsPerColl {
			return nil, fmt.Errorf("%s payload needs a positive collection id and 1..%d shards, got %d and %d",
				typ, vocab.MaxVChannelsPerColl, p.CollectionId, p.Shards)
		}
	case vocab.MsgDropCollection:
		var p logpb.DropCollectionPayload
		if !set["payload-hex"] {
			return nil, fmt.Errorf("%s needs --collection-id (or --payload-hex)", typ)
		}
		if err := proto.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("--payload-hex is not a DropCollectionPayload: %v", err)
		}
		if p.CollectionId <= 0 {
			return nil, fmt.Errorf("%s payload needs a positive collection id, got %d", typ, p.CollectionId)
		}
	case vocab.MsgAlterReplicateConfig:
		var p logpb.ReplicateConfiguration
		if err := proto.Unmarshal(payload, &p); err != nil {
			return nil, fmt.Errorf("--payload-hex is not a ReplicateConfiguration: %v", err)
		}
		if err := trimInvalid(commands.ValidateReplicateConfiguration(&p)); err != nil {
			return nil, fmt.Errorf("%s payload: %v (or use 'coordctl replicate set')", typ, err)
		}
	}
	return payload, nil
}

// parseResourceKey parses DOMAIN:KEY[:shared]. The key may contain ':'
// (COLLECTION_NAME keys are "db:collection"); a trailing ":shared" or
// ":exclusive" is the mode, so a key that itself ends in ":shared" is
// written with ":exclusive" (or ":shared") after it.
func parseResourceKey(s string) (*coordpb.ResourceKey, error) {
	rest, shared := s, false
	if r, ok := strings.CutSuffix(rest, ":shared"); ok {
		rest, shared = r, true
	} else if r, ok := strings.CutSuffix(rest, ":exclusive"); ok {
		rest = r
	}
	domain, key, _ := strings.Cut(rest, ":")
	domain = strings.ToUpper(domain)
	known := false
	for _, d := range client.ResourceDomains() {
		known = known || d == domain
	}
	if !known {
		return nil, fmt.Errorf("--key %q: unknown domain %q (want one of %s)", s, domain, strings.Join(client.ResourceDomains(), ", "))
	}
	return &coordpb.ResourceKey{Domain: domain, Key: key, Shared: shared}, nil
}

// parseIdempotency parses SCOPE:ID:KEY (the key may contain ':').
func parseIdempotency(s string) (*client.IdempotencyKey, error) {
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return nil, fmt.Errorf("--idempotency %q: want SCOPE:ID:KEY", s)
	}
	ik := &client.IdempotencyKey{Scope: strings.ToUpper(parts[0]), Key: parts[2]}
	if parts[1] != "" || ik.Scope != client.ScopeCluster {
		id, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--idempotency %q: ID must be a non-negative integer, got %q", s, parts[1])
		}
		ik.ScopeID = id
	}
	if _, err := ik.Scoped(); err != nil {
		return nil, fmt.Errorf("--idempotency %q: %v", s, trimInvalid(err))
	}
	return ik, nil
}

// parseBroadcastID accepts a positive decimal broadcast ID.
func parseBroadcastID(s string) (uint64, error) {
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("broadcast ID must be a positive integer, got %q", s)
	}
	return id, nil
}

func bindBroadcastGet(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		id, err := oneArg(args, "ID", parseBroadcastID)
		if err != nil {
			return action{}, err
		}
		return action{what: "broadcast get", run: fetched(func(ctx context.Context, c *client.Client) (*coordpb.BroadcastInfo, error) {
			return c.GetBroadcast(ctx, id)
		}, func(i *coordpb.BroadcastInfo) any { return toBroadcastInfoJSON(i) }, writeBroadcastInfo)}, nil
	}
}

func bindBroadcastList(fs *flag.FlagSet) func([]string) (action, error) {
	pending := fs.Bool("pending", false, "list pending tasks only (skip tombstones)")
	limit := fs.Int("limit", 0, fmt.Sprintf("list at most the newest `N` tasks (0: the server's default, 1000; max %d)", client.MaxListBroadcasts))
	return func(args []string) (action, error) {
		if err := wantArgs(args, 0, 0, "no arguments"); err != nil {
			return action{}, err
		}
		if *limit < 0 || *limit > client.MaxListBroadcasts {
			return action{}, fmt.Errorf("--limit must be in 0..%d, got %d", client.MaxListBroadcasts, *limit)
		}
		pendingOnly, n := *pending, uint32(*limit)
		return action{what: "broadcast list", run: fetched(func(ctx context.Context, c *client.Client) ([]*coordpb.BroadcastInfo, error) {
			return c.ListBroadcasts(ctx, pendingOnly, n)
		}, toBroadcastsJSON, writeBroadcastsTable)}, nil
	}
}

func bindBroadcastRetry(*flag.FlagSet) func([]string) (action, error) {
	return func(args []string) (action, error) {
		id, err := oneArg(args, "ID", parseBroadcastID)
		if err != nil {
			return action{}, err
		}
		return action{what: "broadcast retry", mutates: true, run: func(ctx context.Context, e *env) error {
			if err := e.c.RetryBroadcast(ctx, id); err != nil {
				return err
			}
			return e.show(broadcastRetriedJSON{BroadcastID: id, Retried: true}, sentence("Retry of broadcast %d requested; see 'coordctl broadcast get %d' for its progress.\n", id, id))
		}}, nil
	}
}

func bindBroadcastAbandon(fs *flag.FlagSet) func([]string) (action, error) {
	reason := fs.String("reason", "", "why the task is given up (`TEXT`, required; kept with the task)")
	return func(args []string) (action, error) {
		id, err := oneArg(args, "ID", parseBroadcastID)
		if err != nil {
			return action{}, err
		}
		r, err := requiredReason(*reason)
		if err != nil {
			return action{}, err
		}
		return action{what: "broadcast abandon", mutates: true, run: func(ctx context.Context, e *env) error {
			if err := e.c.AbandonBroadcast(ctx, id, r); err != nil {
				return err
			}
			return e.show(broadcastAbandonedJSON{BroadcastID: id, Abandoned: true, Reason: r}, sentence("Abandoned broadcast %d: its callback will not run and its resource keys are released.\n", id))
		}}, nil
	}
}

// JSON shapes of the broadcast commands (see output.go).

type checkpointJSON struct {
	VChannel string `json:"vchannel"`
	Term     int64  `json:"term"`
	Offset   uint64 `json:"offset"`
	TimeTick uint64 `json:"time_tick"`
}

type broadcastSentJSON struct {
	BroadcastID   uint64           `json:"broadcast_id"`
	Duplicated    bool             `json:"duplicated"`
	LockWaitMs    int64            `json:"lock_wait_ms"`
	AppendResults []checkpointJSON `json:"append_results"`
}

type resourceKeyJSON struct {
	Domain string `json:"domain"`
	Key    string `json:"key"`
	Shared bool   `json:"shared"`
}

type broadcastInfoJSON struct {
	BroadcastID      uint64            `json:"broadcast_id"`
	MessageType      string            `json:"message_type"`
	State            string            `json:"state"`
	ResourceKeys     []resourceKeyJSON `json:"resource_keys"`
	VChannels        []string          `json:"vchannels"`
	Acked            []checkpointJSON  `json:"acked"`
	AckSyncUp        bool              `json:"ack_sync_up"`
	IdempotencyKey   string            `json:"idempotency_key"`
	CreatedUnixMs    int64             `json:"created_unix_ms"`
	TombstonedUnixMs int64             `json:"tombstoned_unix_ms"`
	CallbackAttempts uint32            `json:"callback_attempts"`
	LastError        string            `json:"last_error"`
	AbandonedReason  string            `json:"abandoned_reason"`
	PayloadBytes     uint32            `json:"payload_bytes"`
}

type broadcastsJSON struct {
	Broadcasts []broadcastInfoJSON `json:"broadcasts"`
}

type broadcastRetriedJSON struct {
	BroadcastID uint64 `json:"broadcast_id"`
	Retried     bool   `json:"retried"`
}

type broadcastAbandonedJSON struct {
	BroadcastID uint64 `json:"broadcast_id"`
	Abandoned   bool   `json:"abandoned"`
	Reason      string `json:"reason"`
}

func toCheckpointsJSON(cps []*coordpb.Checkpoint) []checkpointJSON {
	out := make([]checkpointJSON, 0, len(cps))
	for _, cp := range cps {
		out = append(out, checkpointJSON{VChannel: cp.GetVchannel(), Term: cp.GetTerm(), Offset: cp.GetOffset(), TimeTick: cp.GetTimeTick()})
	}
	return out
}

func toBroadcastsJSON(infos []*coordpb.BroadcastInfo) any {
	out := broadcastsJSON{Broadcasts: []broadcastInfoJSON{}}
	for _, i := range infos {
		out.Broadcasts = append(out.Broadcasts, toBroadcastInfoJSON(i))
	}
	return out
}

func toBroadcastInfoJSON(i *coordpb.BroadcastInfo) broadcastInfoJSON {
	out := broadcastInfoJSON{
		BroadcastID: i.GetBroadcastId(), MessageType: i.GetMessageType(), State: i.GetState(), ResourceKeys: []resourceKeyJSON{},
		VChannels: append([]string{}, i.GetVchannels()...), Acked: toCheckpointsJSON(i.GetAcked()), AckSyncUp: i.GetAckSyncUp(),
		IdempotencyKey: i.GetIdempotencyKey(), CreatedUnixMs: i.GetCreatedUnixMs(), TombstonedUnixMs: i.GetTombstonedUnixMs(),
		CallbackAttempts: i.GetCallbackAttempts(), LastError: i.GetLastError(), AbandonedReason: i.GetAbandonedReason(),
		PayloadBytes: i.GetPayloadBytes(),
	}
	for _, k := range i.GetResourceKeys() {
		out.ResourceKeys = append(out.ResourceKeys, resourceKeyJSON{Domain: k.GetDomain(), Key: k.GetKey(), Shared: k.GetShared()})
	}
	return out
}

func printBroadcastSent(e *env, typ string, resp *coordpb.BroadcastResponse) error {
	return e.show(broadcastSentJSON{BroadcastID: resp.GetBroadcastId(), Duplicated: resp.GetDuplicated(),
		LockWaitMs: resp.GetLockWaitMs(), AppendResults: toCheckpointsJSON(resp.GetAppendResults())}, func(w io.Writer) error {
		wait := (time.Duration(resp.GetLockWaitMs()) * time.Millisecond).String()
		if resp.GetDuplicated() {
			fmt.Fprintf(w, "Broadcast %d (%s) was sent before with this idempotency key; it is done on %d channel(s).\n\n",
				resp.GetBroadcastId(), typ, len(resp.GetAppendResults()))
		} else {
			fmt.Fprintf(w, "Broadcast %d (%s) done on %d channel(s); waited %s for resource keys.\n\n",
				resp.GetBroadcastId(), typ, len(resp.GetAppendResults()), wait)
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "VCHANNEL\tTERM\tOFFSET\tTIME TICK")
		for _, cp := range resp.GetAppendResults() {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", cp.GetVchannel(), cp.GetTerm(), cp.GetOffset(), cp.GetTimeTick())
		}
		return tw.Flush()
	})
}

// unixMsString renders a Unix millisecond time in UTC ("-" for 0).
func unixMsString(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}

func resourceKeyString(k *coordpb.ResourceKey) string {
	s := k.GetDomain()
	if k.GetKey() != "" {
		s += ":" + k.GetKey()
	}
	if k.GetShared() {
		s += " (shared)"
	}
	return s
}

func writeBroadcastInfo(w io.Writer, i *coordpb.BroadcastInfo) error {
	fmt.Fprintf(w, "Broadcast %d (%s): %s.\n\n", i.GetBroadcastId(), i.GetMessageType(), i.GetState())
	var keys []string
	for _, k := range i.GetResourceKeys() {
		keys = append(keys, resourceKeyString(k))
	}
	tw := newTable(w)
	fmt.Fprintf(tw, "Created\t%s\n", unixMsString(i.GetCreatedUnixMs()))
	fmt.Fprintf(tw, "Tombstoned\t%s\n", unixMsString(i.GetTombstonedUnixMs()))
	fmt.Fprintf(tw, "Resource keys\t%s\n", dash(strings.Join(keys, ", ")))
	fmt.Fprintf(tw, "Idempotency key\t%s\n", dash(i.GetIdempotencyKey()))
	fmt.Fprintf(tw, "Ack sync up\t%t\n", i.GetAckSyncUp())
	fmt.Fprintf(tw, "Payload\t%d bytes\n", i.GetPayloadBytes())
	fmt.Fprintf(tw, "Acked\t%d of %d target(s)\n", len(i.GetAcked()), len(i.GetVchannels()))
	fmt.Fprintf(tw, "Callback attempts\t%d\n", i.GetCallbackAttempts())
	fmt.Fprintf(tw, "Last error\t%s\n", dash(oneLine(i.GetLastError())))
	fmt.Fprintf(tw, "Abandoned reason\t%s\n", dash(oneLine(i.GetAbandonedReason())))
	if err := tw.Flush(); err != nil {
		return err
	}
	acked := map[string]*coordpb.Checkpoint{}
	for _, cp := range i.GetAcked() {
		acked[cp.GetVchannel()] = cp
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "TARGET\tACKED\tTERM\tOFFSET\tTIME TICK")
	for _, v := range i.GetVchannels() {
		if cp, ok := acked[v]; ok {
			fmt.Fprintf(tw, "%s\tyes\t%d\t%d\t%d\n", v, cp.GetTerm(), cp.GetOffset(), cp.GetTimeTick())
		} else {
			fmt.Fprintf(tw, "%s\tno\t-\t-\t-\n", v)
		}
	}
	return tw.Flush()
}

func writeBroadcastsTable(w io.Writer, infos []*coordpb.BroadcastInfo) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tACKED\tATTEMPTS\tCREATED\tNOTE")
	for _, i := range infos {
		note := "-"
		switch {
		case i.GetAbandonedReason() != "":
			note = "abandoned: " + oneLine(i.GetAbandonedReason())
		case i.GetLastError() != "":
			note = "last error: " + oneLine(i.GetLastError())
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", i.GetBroadcastId(), i.GetMessageType(), i.GetState(),
			len(i.GetAcked()), len(i.GetVchannels()), i.GetCallbackAttempts(), unixMsString(i.GetCreatedUnixMs()), note)
	}
	return tw.Flush()
}
