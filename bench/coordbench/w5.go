package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coordd/coordd/api/coordpb"
)

// w5: DDL broadcasts to 16 VChannels (the CChannel and 15 PChannels), each
// under one exclusive COLLECTION_NAME resource key: a key of its own
// (non-conflicting: broadcasts run concurrently) or one shared hot key
// (conflicting: they run one after another). A call returns once the task
// is done on both systems. Conflicting callers queue on the key, so a
// call's deadline is 60 s.
func w5() workloadDef {
	return workloadDef{setup: setupBroadcast, maxOps: 5000, callTimeout: time.Minute, variants: []variant{
		{name: "16-targets", newOp: w5Op(false)},
		{name: "16-targets-conflicting", newOp: w5Op(true)},
	}}
}

// broadcastSeq names the non-conflicting keys (never reused in a run).
var broadcastSeq atomic.Uint64

func setupBroadcast(s *system) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := coordpb.NewChannelsClient(s.conns[0]).ListPChannels(ctx, &coordpb.ListPChannelsRequest{})
	if err != nil {
		return err
	}
	s.targets = broadcastTargets(resp, 16)
	if len(s.targets) != 16 {
		return fmt.Errorf("found %d broadcast targets, want 16", len(s.targets))
	}
	return nil
}

func w5Op(conflicting bool) func(s *system, c, clients int) clientOp {
	return func(s *system, c, _ int) clientOp {
		bc := coordpb.NewBroadcasterClient(s.conn(c))
		return func(ctx context.Context, _ int) error {
			key := "db:hot"
			if !conflicting {
				key = fmt.Sprintf("db:c%d", broadcastSeq.Add(1))
			}
			_, err := bc.Broadcast(ctx, &coordpb.BroadcastRequest{MessageType: "AlterDatabase", Payload: []byte("x"), Vchannels: s.targets,
				ResourceKeys: []*coordpb.ResourceKey{{Domain: "COLLECTION_NAME", Key: key}}})
			return err
		}
	}
}
