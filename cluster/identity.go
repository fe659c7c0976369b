package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/coordd/coordd/raftnode"
)

// A cluster bootstrapped from --peers needs one cluster ID that all its
// founding members agree on without a leader, and that a member which lost
// its data dir can never produce again. Each member's data dir has a random
// incarnation (datadir.Identity); the cluster ID is a hash of the founding
// members' IDs and incarnations. Before bootstrapping, a member asks every
// listed peer for its incarnation over the raft port (raftnode.ProbeMember):
// so a first bootstrap needs every listed peer running, and a member whose
// data dir was wiped (a new incarnation) derives a different ID than the one
// its running peers hold, and refuses to start.

// DeriveClusterID is the cluster ID of a cluster founded by the members
// with the given incarnations (member ID → incarnation).
func DeriveClusterID(incarnations map[string]string) string {
	ids := make([]string, 0, len(incarnations))
	for id := range incarnations {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	h := sha256.New()
	for _, id := range ids {
		fmt.Fprintf(h, "%s=%s\n", id, incarnations[id])
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// probeInterval is how often an unanswered peer is asked again.
const probeInterval = 250 * time.Millisecond

// agreeClusterID asks every peer who it is until all have answered, then
// returns the cluster ID they found together. A peer that already belongs to
// a cluster with another ID means this member is not one of its founders (or
// lost its data dir): that is refused.
func agreeClusterID(ctx context.Context, node *raftnode.Node, o Options) (string, error) {
	own := node.Identity()
	incs := map[string]string{own.MemberID: own.Incarnation}
	clusters := map[string]string{}
	lastLog := time.Now()
	for {
		var missing []string
		for _, p := range o.Peers {
			if _, done := incs[p.ID]; done {
				continue
			}
			who, err := raftnode.ProbeMember(p.RaftAddr, time.Second, o.RaftTLS.ClientConfig())
			switch {
			case err != nil:
				missing = append(missing, fmt.Sprintf("%s (%v)", p.ID, err))
			case who.MemberID != p.ID:
				return "", fmt.Errorf("--peers lists %s at %s, but member %s answers there", p.ID, p.RaftAddr, who.MemberID)
			default:
				incs[p.ID] = who.Incarnation
				if who.ClusterID != "" {
					clusters[p.ID] = who.ClusterID
				}
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Since(lastLog) > 5*time.Second {
			o.Logger.Info("waiting for every --peers member to answer before bootstrapping", "missing", strings.Join(missing, ", "))
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("bootstrap needs every --peers member running; still missing %s: %w", strings.Join(missing, ", "), ctx.Err())
		case <-time.After(probeInterval):
		}
	}
	id := DeriveClusterID(incs)
	for _, p := range o.Peers {
		if c, ok := clusters[p.ID]; ok && c != id {
			return "", fmt.Errorf("member %s (%s) already belongs to cluster %s, which this data dir (%s) did not found: "+
				"it is new, or it was wiped; a member that lost its data dir must not bootstrap again: "+
				"remove it (coordctl cluster remove %s), then start it with an empty data dir and --join instead of --peers "+
				"(docs/operations.md#replacing-a-member)", p.ID, p.RaftAddr, c, node.DataDir(), own.MemberID)
		}
	}
	return id, nil
}
