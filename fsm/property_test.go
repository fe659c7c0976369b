package fsm

import (
	"bytes"
	"fmt"
	"sort"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Small pools make collisions likely: repeated members, request IDs and
// terms, plus values the validators reject.
var (
	poolMemberIDs  = []string{"n1", "n2", "n3", "n1", "n2", "n1.x_y-z", "", "bad id"}
	poolAddrs      = []string{"127.0.0.1:7001", "h:2", "[::1]:9", "127.0.0.1:7001", "h:2", "", "h:0", "nohost"}
	poolRequestIDs = []string{"", "", "", "r0", "r1", "r2", "r3", "r4"}
	poolIDCounts   = []uint64{0, 1, 2, 7, 100, commands.MaxReserveIDs, commands.MaxReserveIDs + 1}
)

// genCommand draws one command. s is the state the command will most
// likely be applied to (the state before its entry), so channel commands can
// name existing pchannels, nodes and current terms most of the time.
func genCommand(t *rapid.T, label string, s *State) commands.Command {
	memberID := func(name string) string { return rapid.SampledFrom(poolMemberIDs).Draw(t, label+name) }
	addr := func(name string) string { return rapid.SampledFrom(poolAddrs).Draw(t, label+name) }
	var c commands.Command
	switch kind := rapid.IntRange(0, 21).Draw(t, label+".kind"); kind {
	case 0:
		c = leaderEstablished(rapid.Uint64Range(0, 8).Draw(t, label+".term"), memberID(".leader"))
	case 1:
		var body logpb.UpsertMember
		if rapid.IntRange(0, 9).Draw(t, label+".hasMember") > 0 {
			body.Member = &logpb.Member{Id: memberID(".id"), RaftAddr: addr(".raft"), GrpcAddr: addr(".grpc"), HttpAddr: addr(".http")}
		}
		c = cmd(&body)
	case 2:
		c = removeMember(memberID(".id"))
	case 3:
		limit := rapid.OneOf(
			rapid.Int64Range(-2, 60),
			rapid.SampledFrom([]int64{1<<46 - 1, 1 << 46}),
		).Draw(t, label+".limit")
		c = extendTSO(limit)
	case 4:
		c = reserveIDs(rapid.SampledFrom(poolIDCounts).Draw(t, label+".count"))
	case 5:
		// A skippable command from a newer binary.
		c = commands.Command{Type: commands.Ignorable | commands.Type(rapid.Uint32Range(0x0700, 0x0702).Draw(t, label+".type")), Version: 1}
	default:
		// Channel and broadcast commands are most of the log.
		if kind >= 16 {
			c = genBroadcastCommand(t, label, s)
		} else {
			c = genChannelCommand(t, label, s)
		}
		// Rarely with a request ID: a repeated ID returns the first result
		// without applying, which would starve the channel state.
		if rapid.IntRange(0, 4).Draw(t, label+".hasRequestID") == 0 {
			c.RequestID = rapid.SampledFrom(poolRequestIDs).Draw(t, label+".requestID")
		}
		c.ProposedAtUnixMs = rapid.Int64Range(0, 1_000_000).Draw(t, label+".at")
		// Mostly unstamped or stamped with the current leader, so they are
		// not all rejected as stale.
		c.LeaderTerm = rapid.SampledFrom([]uint64{0, 0, s.EstablishedTerm(), s.EstablishedTerm(), rapid.Uint64Range(0, 8).Draw(t, label+".anyTerm")}).Draw(t, label+".leaderTerm")
		return c
	}
	c.RequestID = rapid.SampledFrom(poolRequestIDs).Draw(t, label+".requestID")
	c.LeaderTerm = rapid.Uint64Range(0, 8).Draw(t, label+".leaderTerm")
	c.ProposedAtUnixMs = rapid.Int64Range(0, 1_000_000).Draw(t, label+".at")
	return c
}

// Pools for channel commands: few names, so commands collide; a few invalid
// values the validators reject.
var (
	poolPChannels    = []string{"dml_0", "dml_1", "dml_2", "dml_3", "dml_4", "dml_10"}
	poolBadPChannels = []string{"dml_01", "p_", ""}
	poolNodeAddrs    = []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1", "10.0.0.4:1", "10.0.0.1:1", "nohost"}
	poolIncarnations = []string{"a", "b", "c", "a", ""}
	poolClusterIDs   = []string{clusterID, clusterID, clusterID, "dr", "bad id"}
)

// pickPChannels draws 1..max distinct pchannel names, mostly existing ones.
func pickPChannels(t *rapid.T, label string, s *State, max int) []string {
	names := pchannelNames(s)
	if len(names) == 0 || rapid.IntRange(0, 9).Draw(t, label+".fromPool") == 0 {
		names = poolPChannels
	}
	if rapid.IntRange(0, 29).Draw(t, label+".bad") == 0 {
		names = append(append([]string(nil), names...), poolBadPChannels...)
	}
	return rapid.SliceOfNDistinct(rapid.SampledFrom(names), 1, min(max, len(names)), rapid.ID[string]).Draw(t, label)
}

// pickNode draws a node ID: mostly a known node, sometimes anything.
func pickNode(t *rapid.T, label string, s *State) uint64 {
	var nodes, up []uint64
	for _, n := range s.StreamingNodes() {
		nodes = append(nodes, n.Id)
		if n.State == nodeUp {
			up = append(up, n.Id)
		}
	}
	switch k := rapid.IntRange(0, 9).Draw(t, label+".kind"); {
	case k == 0 || len(nodes) == 0:
		return rapid.Uint64Range(0, 8).Draw(t, label+".id")
	case k <= 2 || len(up) == 0:
		return rapid.SampledFrom(nodes).Draw(t, label+".node")
	default:
		return rapid.SampledFrom(up).Draw(t, label+".up")
	}
}

// pickTerm draws a term for pchannel p: mostly its current term.
func pickTerm(t *rapid.T, label string, s *State, p string) int64 {
	cur := int64(1)
	if r, ok := s.PChannel(p); ok {
		cur = r.Term
	}
	switch rapid.IntRange(0, 19).Draw(t, label+".kind") {
	case 0, 1:
		return max(cur-1, 1)
	case 2, 3:
		return cur + 1
	case 4:
		return rapid.Int64Range(0, 12).Draw(t, label+".any")
	}
	return cur
}

// pickTerms draws (pchannel, term) pairs, mostly for channels in state want
// so the two-phase protocol makes progress.
func pickTerms(t *rapid.T, label string, s *State, want logpb.PChannelState) []*logpb.PChannelTerm {
	var out []*logpb.PChannelTerm
	var names []string
	for _, p := range s.PChannels() {
		if p.State == want {
			names = append(names, p.Name)
		}
	}
	var picked []string
	if len(names) > 0 && rapid.IntRange(0, 3).Draw(t, label+".inState") > 0 {
		picked = rapid.SliceOfNDistinct(rapid.SampledFrom(names), 1, min(3, len(names)), rapid.ID[string]).Draw(t, label+".pchannels")
	} else {
		picked = pickPChannels(t, label+".pchannels", s, 3)
	}
	for i, p := range picked {
		l := fmt.Sprintf("%s[%d]", label, i)
		out = append(out, ptr(p, pickTerm(t, l+".term", s, p), rapid.SampledFrom([]string{"", "broken"}).Draw(t, l+".reason")))
	}
	return out
}

func genChannelCommand(t *rapid.T, label string, s *State) commands.Command {
	switch kind := rapid.IntRange(0, 14).Draw(t, label+".channelKind"); kind {
	case 0:
		b := &logpb.RegisterStreamingNode{
			Address:     rapid.SampledFrom(poolNodeAddrs).Draw(t, label+".addr"),
			Incarnation: rapid.SampledFrom(poolIncarnations).Draw(t, label+".incarnation"),
		}
		if rapid.IntRange(0, 3).Draw(t, label+".replace") == 0 {
			b.ReplaceNodeId = pickNode(t, label+".replaceNode", s)
		}
		return cmd(b)
	case 1:
		return initStreaming(rapid.SampledFrom(poolClusterIDs).Draw(t, label+".cluster"),
			rapid.SliceOfNDistinct(rapid.SampledFrom(poolPChannels), 1, 4, rapid.ID[string]).Draw(t, label+".pchannels")...)
	case 2:
		return addPCh(pickPChannels(t, label+".pchannels", &State{ch: newChannelsState()}, 3)...)
	case 3, 4, 5:
		var as []*logpb.PChannelAssignment
		for i, p := range pickPChannels(t, label+".pchannels", s, 3) {
			l := fmt.Sprintf("%s[%d]", label, i)
			mode := rapid.SampledFrom([]logpb.AccessMode{rw, rw, rw, ro}).Draw(t, l+".mode")
			as = append(as, asgMode(p, pickNode(t, l+".node", s), mode, pickTerm(t, l+".term", s, p)))
		}
		return assign(as...)
	case 6, 7:
		return done(pickTerms(t, label, s, stAssigning)...)
	case 8:
		return unavailable(pickTerms(t, label, s, stAssigned)...)
	case 9:
		return cmd(&logpb.RecordAssignFailure{Channel: pickTerms(t, label, s, stAssigning)[0]})
	case 10:
		id := pickNode(t, label+".node", s)
		epoch := rapid.Uint64Range(0, 40).Draw(t, label+".epoch")
		if n, ok := s.StreamingNode(id); ok && rapid.Bool().Draw(t, label+".rightEpoch") {
			epoch = n.Epoch
		}
		if rapid.IntRange(0, 4).Draw(t, label+".drain") > 0 {
			return drain(id, rapid.Bool().Draw(t, label+".draining"), "")
		}
		return markDown(id, epoch, "gone")
	case 11:
		return allocV(rapid.Int64Range(0, 6).Draw(t, label+".coll"), rapid.Uint32Range(0, 5).Draw(t, label+".count"))
	case 12:
		return dropV(rapid.Int64Range(0, 7).Draw(t, label+".coll"))
	case 13:
		return genReplicate(t, label, s)
	case 14:
		return resetRole(rapid.SampledFrom([]string{"primary site lost", "promote", " "}).Draw(t, label+".reason"))
	default:
		t.Fatalf("channel kind %d", kind)
		return commands.Command{}
	}
}

// genReplicate draws a replication configuration: mostly a valid change
// of the current one (append to this cluster's list, flip the role), some
// invalid ones (reorder, shrink, unknown pchannels, other clusters only).
func genReplicate(t *rapid.T, label string, s *State) commands.Command {
	own := s.ChannelsMeta().ClusterId
	if own == "" || rapid.IntRange(0, 9).Draw(t, label+".otherCluster") == 0 {
		own = rapid.SampledFrom(poolClusterIDs).Draw(t, label+".cluster")
	}
	var list []string
	for _, cl := range s.ReplicateConfiguration().GetClusters() {
		if cl.ClusterId == own {
			list = append(list, cl.Pchannels...)
		}
	}
	switch rapid.IntRange(0, 5).Draw(t, label+".change") {
	case 0, 1, 2: // append an existing pchannel not listed yet
		listed := map[string]bool{}
		for _, p := range list {
			listed[p] = true
		}
		var extra []string
		for _, p := range pchannelNames(s) {
			if !listed[p] {
				extra = append(extra, p)
			}
		}
		if len(extra) > 0 {
			list = append(list, rapid.SampledFrom(extra).Draw(t, label+".append"))
		}
	case 3: // reorder or shrink
		if len(list) > 1 {
			list = append(list[1:len(list):len(list)], list[0])
		} else if len(list) == 1 {
			list = nil
		}
	case 4: // anything
		list = pickPChannels(t, label+".pchannels", s, 3)
	}
	if len(list) == 0 {
		list = pickPChannels(t, label+".pchannels", s, 2)
	}
	peer := make([]string, len(list))
	for i := range peer {
		peer[i] = vocab.PChannelName("dr-dml", i)
	}
	clusters := []*logpb.ReplicateCluster{rcluster(own, list...), rcluster("dr", peer...)}
	switch rapid.IntRange(0, 3).Draw(t, label+".topology") {
	case 0:
		return replicate(clusters)
	case 1:
		return replicate(clusters, edge("dr", own))
	default:
		return replicate(clusters, edge(own, "dr"))
	}
}

type entry struct {
	index uint64
	data  []byte
}

// genEntries returns a log of encoded entries with increasing (sometimes
// skipping) indexes, to be applied to from. Commands are drawn against the
// state the log has reached, which the generator tracks by applying each
// entry as it goes. An entry holds at most one AssignPChannels: Successor
// bounds a term's growth to 1 per entry, and a correct proposer cannot
// stack two assignments of a channel in one entry anyway (the second needs
// the term the first produces).
func genEntries(t *rapid.T, label string, from *State, maxEntries int) []entry {
	return genEntriesWith(t, label, from, maxEntries, genCommand)
}

func genEntriesWith(t *rapid.T, label string, from *State, maxEntries int,
	gen func(t *rapid.T, label string, s *State) commands.Command,
) []entry {
	n := rapid.IntRange(1, maxEntries).Draw(t, label+".entries")
	out := make([]entry, 0, n)
	s := from
	for i := 0; i < n; i++ {
		index := s.AppliedIndex() + rapid.Uint64Range(1, 3).Draw(t, fmt.Sprintf("%s[%d].gap", label, i))
		k := rapid.IntRange(1, 5).Draw(t, fmt.Sprintf("%s[%d].batch", label, i))
		cmds := make([]commands.Command, 0, k)
		assigns := 0
		for j := 0; j < k; j++ {
			c := gen(t, fmt.Sprintf("%s[%d][%d]", label, i, j), s)
			if c.Type == commands.TypeAssignPChannels {
				if assigns++; assigns > 1 {
					continue
				}
			}
			cmds = append(cmds, c)
		}
		data, err := commands.EncodeEntry(cmds)
		if err != nil {
			t.Fatalf("EncodeEntry: %v", err)
		}
		next, _, err := s.Apply(index, data)
		if err != nil {
			t.Fatalf("generator Apply(%d): %v", index, err)
		}
		s = next
		out = append(out, entry{index, data})
	}
	return out
}

// replay applies entries to s, checking the invariants after every apply and
// that the state applied to is left untouched. It returns the final state
// and every result in order.
func replay(t *rapid.T, s *State, entries []entry) (*State, []*logpb.Result) {
	return replayWith(t, s, entries, nil)
}

// stepCheck is an extra check of one applied entry.
type stepCheck func(t *rapid.T, prev, next *State, cmds []commands.Command, results []*logpb.Result)

// replayWith is replay with an extra check after every entry. The
// broadcaster's step properties (checkBroadcastStep) are checked always.
func replayWith(t *rapid.T, s *State, entries []entry, check stepCheck) (*State, []*logpb.Result) {
	var all []*logpb.Result
	for _, e := range entries {
		before := snapshotBytes(t, s)
		next, results, err := s.Apply(e.index, e.data)
		if err != nil {
			t.Fatalf("Apply(%d): %v", e.index, err)
		}
		if err := next.CheckInvariants(); err != nil {
			t.Fatalf("invariants after index %d: %v", e.index, err)
		}
		if err := Successor(s, next); err != nil {
			t.Fatalf("successor at index %d: %v", e.index, err)
		}
		if next.AppliedIndex() != e.index {
			t.Fatalf("applied index %d, want %d", next.AppliedIndex(), e.index)
		}
		if !bytes.Equal(before, snapshotBytes(t, s)) {
			t.Fatalf("Apply(%d) changed the previous state", e.index)
		}
		for i, r := range results {
			if r == nil {
				t.Fatalf("index %d command %d: nil result", e.index, i)
			}
		}
		cmds, err := commands.DecodeEntry(e.data)
		if err != nil {
			t.Fatal(err)
		}
		checkBroadcastStep(t, s, next, cmds, results)
		if check != nil {
			check(t, s, next, cmds, results)
		}
		all = append(all, results...)
		s = next
	}
	return s, all
}

func equalResults(t *rapid.T, what string, a, b []*logpb.Result) {
	if len(a) != len(b) {
		t.Fatalf("%s: %d results vs %d", what, len(a), len(b))
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("%s: result %d differs: %v vs %v", what, i, a[i], b[i])
		}
	}
}

// checkRangesDisjoint: a reserved ID range is never handed out twice. A
// repeated request returns the identical range, which is fine.
func checkRangesDisjoint(t *rapid.T, results []*logpb.Result, nextID uint64) {
	byFirst := map[uint64]uint64{}
	for _, r := range results {
		ir := r.GetIdRange()
		if ir == nil {
			continue
		}
		if ir.Count == 0 {
			t.Fatalf("empty range %v", ir)
		}
		if c, seen := byFirst[ir.First]; seen && c != ir.Count {
			t.Fatalf("two ranges start at %d: counts %d and %d", ir.First, c, ir.Count)
		}
		byFirst[ir.First] = ir.Count
	}
	firsts := make([]uint64, 0, len(byFirst))
	for f := range byFirst {
		firsts = append(firsts, f)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	end := uint64(1)
	for _, f := range firsts {
		if f < end {
			t.Fatalf("range at %d overlaps an earlier range ending at %d", f, end)
		}
		end = f + byFirst[f]
	}
	if end > nextID {
		t.Fatalf("handed out IDs up to %d, but NextID is %d", end, nextID)
	}
}

// TestReplicasAgree: two replicas applying the same random log hold
// byte-identical states and return identical results.
func TestReplicasAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		log := genEntries(t, "log", New(), 40)
		a, ra := replay(t, New(), log)
		b, rb := replay(t, New(), log)
		equalResults(t, "replicas", ra, rb)
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("replicas hold different states")
		}
		checkRangesDisjoint(t, ra, a.NextID())
		if a.DedupLen() > len(poolRequestIDs) {
			t.Fatalf("DedupLen %d with only %d distinct request IDs", a.DedupLen(), len(poolRequestIDs))
		}
	})
}

// TestSnapshotReplay: a state restored from a snapshot is indistinguishable
// from the original: same snapshot bytes, and the same results and states
// for any further log.
func TestSnapshotReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s, prefixResults := replay(t, New(), genEntries(t, "prefix", New(), 30))
		data := snapshotBytes(t, s)
		r, err := ReadSnapshot(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("ReadSnapshot: %v", err)
		}
		if err := r.CheckInvariants(); err != nil {
			t.Fatalf("restored invariants: %v", err)
		}
		if again := snapshotBytes(t, r); !bytes.Equal(again, data) {
			t.Fatal("snapshot -> restore -> snapshot changed the bytes")
		}
		suffix := genEntries(t, "suffix", s, 20)
		a, ra := replay(t, s, suffix)
		b, rb := replay(t, r, suffix)
		equalResults(t, "original vs restored", ra, rb)
		if !bytes.Equal(snapshotBytes(t, a), snapshotBytes(t, b)) {
			t.Fatal("original and restored states diverged")
		}
		checkRangesDisjoint(t, append(prefixResults, ra...), a.NextID())
		// Applying the suffix did not change the snapshotted state.
		if !bytes.Equal(snapshotBytes(t, s), data) {
			t.Fatal("the snapshotted state changed after further applies")
		}
	})
}

// genChannelOnly draws channel commands, and now and then a new leader (a
// new Global version).
func genChannelOnly(t *rapid.T, label string, s *State) commands.Command {
	if rapid.IntRange(0, 19).Draw(t, label+".leader") == 0 {
		return leaderEstablished(s.EstablishedTerm()+rapid.Uint64Range(0, 1).Draw(t, label+".term"), "c1")
	}
	c := genChannelCommand(t, label, s)
	c.ProposedAtUnixMs = rapid.Int64Range(0, 1_000_000).Draw(t, label+".at")
	if rapid.IntRange(0, 9).Draw(t, label+".hasRequestID") == 0 {
		c.RequestID = rapid.SampledFrom(poolRequestIDs).Draw(t, label+".requestID")
	}
	return c
}

// observablePC is a pchannel record without what RecordAssignFailure may
// change silently (the failure record) and without its version stamp.
func observablePC(p *logpb.PChannelRecord) *logpb.PChannelRecord {
	o := proto.Clone(p).(*logpb.PChannelRecord)
	o.LastError, o.LastErrorMs, o.FailedAttempts, o.VersionGlobal, o.VersionLocal = "", 0, 0, 0, 0
	return o
}

// checkChannelStep checks what one entry did to the channel subsystem: version
// accounting (at most one bump per command, every observable change bumps and
// stamps its records), the PChannel transitions (docs/semantics.md#pchannels),
// and the results.
func checkChannelStep(t *rapid.T, prev, next *State, cmds []commands.Command, results []*logpb.Result) {
	pv, nv := prev.AssignmentVersion(), next.AssignmentVersion()
	n := uint64(len(cmds))
	if nv.Global == pv.Global {
		if nv.Local < pv.Local || nv.Local-pv.Local > n {
			t.Fatalf("version %v -> %v in an entry of %d commands", pv, nv, n)
		}
	} else if nv.Global < pv.Global || nv.Local > n {
		t.Fatalf("version %v -> %v across a new leader in an entry of %d commands", pv, nv, n)
	}
	inRange := func(g, l uint64) bool {
		v := AssignmentVersion{g, l}
		return pv.Less(v) && !nv.Less(v)
	}
	observable := false
	for _, p := range prev.PChannels() {
		np, ok := next.PChannel(p.Name)
		if !ok {
			t.Fatalf("pchannel %s disappeared", p.Name)
		}
		if proto.Equal(observablePC(p), observablePC(np)) {
			if np.VersionGlobal != p.VersionGlobal || np.VersionLocal != p.VersionLocal {
				t.Fatalf("pchannel %s restamped without an observable change", p.Name)
			}
			continue
		}
		observable = true
		if !inRange(np.VersionGlobal, np.VersionLocal) {
			t.Fatalf("pchannel %s changed but is stamped (%d, %d), outside (%v, %v]", p.Name, np.VersionGlobal, np.VersionLocal, pv, nv)
		}
		switch {
		case np.Term == p.Term+1:
			if np.State == stUninit {
				t.Fatalf("pchannel %s got a new term but is UNINITIALIZED", p.Name)
			}
			if np.State == stAssigning && p.State != stUninit {
				found := false
				for _, h := range np.Histories {
					found = found || h.NodeId == p.NodeId && h.Mode == p.Mode && h.Term == p.Term
				}
				if !found {
					t.Fatalf("pchannel %s reassigned %v -> %v without remembering the old placement", p.Name, p, np)
				}
			}
			if np.State == stAssigning && p.State == stUninit && len(np.Histories) != 0 {
				t.Fatalf("pchannel %s: first assignment left histories %v", p.Name, np.Histories)
			}
		case np.Term == p.Term:
			ok := p.State == stAssigning && (np.State == stAssigned || np.State == stUnavailable) ||
				p.State == stAssigned && np.State == stUnavailable
			if !ok || np.NodeId != p.NodeId || np.Mode != p.Mode {
				t.Fatalf("pchannel %s changed without a new term: %v -> %v", p.Name, p, np)
			}
		}
		if np.State == stAssigned && p.State != stAssigned && (np.LastError != "" || np.FailedAttempts != 0) {
			t.Fatalf("pchannel %s ASSIGNED but kept its failure record: %v", p.Name, np)
		}
	}
	for _, n := range next.StreamingNodes() {
		o, ok := prev.StreamingNode(n.Id)
		if ok && proto.Equal(o, n) {
			continue
		}
		observable = true
		if !inRange(n.VersionGlobal, n.VersionLocal) {
			t.Fatalf("node %d changed but is stamped (%d, %d), outside (%v, %v]", n.Id, n.VersionGlobal, n.VersionLocal, pv, nv)
		}
		if ok && (o.Address != n.Address || o.Incarnation != n.Incarnation || o.Epoch != n.Epoch || o.State == nodeDown) {
			t.Fatalf("node %d changed identity or came back from DOWN: %v -> %v", n.Id, o, n)
		}
		if !ok && (n.Id < prev.ChannelsMeta().NextNodeId || n.Epoch != next.AppliedIndex()) {
			t.Fatalf("new node %d (next id was %d) has epoch %d at index %d", n.Id, prev.ChannelsMeta().NextNodeId, n.Epoch, next.AppliedIndex())
		}
	}
	if len(prev.StreamingNodes()) > len(next.StreamingNodes()) && next.DeltaFloor() == prev.DeltaFloor() {
		t.Fatal("node records were evicted but the delta floor did not move")
	}
	pc, nc := prev.Collections(), next.Collections()
	if len(pc) != len(nc) {
		observable = true
	} else {
		for i := range pc {
			observable = observable || !proto.Equal(pc[i], nc[i])
		}
	}
	observable = observable || !proto.Equal(prev.ReplicateConfiguration(), next.ReplicateConfiguration())
	if observable && nv == pv {
		t.Fatalf("the channel view changed but the version stayed %v", nv)
	}
	for _, c := range nc {
		for i, v := range c.Vchannels {
			p := vocab.PChannelOf(v)
			if _, ok := next.PChannel(p); !ok || v != vocab.VChannelName(p, c.CollectionId, i) || vocab.ValidateVChannelName(v) != nil {
				t.Fatalf("collection %d: vchannel %d is %q", c.CollectionId, i, v)
			}
		}
	}

	// Results of commands that really ran (a repeated request ID returns an
	// earlier result).
	for i, c := range cmds {
		r := results[i]
		if c.RequestID != "" || r.Rejection != nil {
			continue
		}
		switch c.Type {
		case commands.TypeAssignPChannels:
			for _, a := range r.GetAssign().GetAssigned() {
				if np, _ := next.PChannel(a.Pchannel); np.Term != a.Term {
					t.Fatalf("assign reported %s at term %d, record has %d", a.Pchannel, a.Term, np.Term)
				}
			}
		case commands.TypeRegisterStreamingNode:
			rn := r.GetRegisterNode()
			if n, ok := next.StreamingNode(rn.GetNodeId()); !ok || n.Epoch != rn.Epoch || !proto.Equal(n.RegisteredVersion, rn.Version) {
				t.Fatalf("register returned %v, record %v", rn, n)
			}
		}
	}
	// The cchannel binds to the first pchannel of the first InitStreaming
	// that applies, and never moves.
	if prev.CChannel() == "" && next.CChannel() != "" {
		for i, c := range cmds {
			b, ok := c.Body.(*logpb.InitStreaming)
			if !ok || c.RequestID != "" || results[i].Rejection != nil {
				continue
			}
			if want := vocab.CChannelName(b.Pchannels[0]); next.CChannel() != want {
				t.Fatalf("cchannel %s, want %s", next.CChannel(), want)
			}
			break
		}
	}
}

// TestChannelProperties drives the channel subsystem with random, mostly
// plausible command streams (registered nodes, current terms) from an
// initialized state and checks every entry with checkChannelStep, on top of
// CheckInvariants and Successor, and that a watcher holding any earlier
// version reaches the current view with AssignmentChangesSince. It also
// checks the generator reaches every interesting outcome, so the property
// is not vacuous.
func TestChannelProperties(t *testing.T) {
	accepted := map[commands.Type]int{}
	reached := map[string]int{}
	rapid.Check(t, func(t *rapid.T) {
		s := New()
		for i, c := range base() {
			next, _, err := s.ApplyCommands(uint64(i+1), c)
			if err != nil {
				t.Fatal(err)
			}
			s = next
		}
		log := genEntriesWith(t, "log", s, 60, genChannelOnly)
		history := []*State{s}
		end, results := replayWith(t, s, log, func(t *rapid.T, prev, next *State, cmds []commands.Command, results []*logpb.Result) {
			checkChannelStep(t, prev, next, cmds, results)
			history = append(history, next)
			checkDeltas(t, history, next)
		})
		var cmds []commands.Command
		for _, e := range log {
			cs, _ := commands.DecodeEntry(e.data)
			cmds = append(cmds, cs...)
		}
		for i, r := range results {
			if r.Rejection == nil {
				accepted[cmds[i].Type]++
			}
		}
		for _, p := range end.PChannels() {
			reached[p.State.String()]++
			if len(p.Histories) > 1 {
				reached["two histories"]++
			}
		}
		for _, n := range end.StreamingNodes() {
			reached[n.State.String()]++
		}
		if !end.IsPrimary() {
			reached["secondary"]++
		}
		if len(end.Collections()) > 0 {
			reached["collections"]++
		}
		// The restored state agrees.
		if r := restore(t, end); !sameChannelView(r, end) {
			t.Fatal("restored channel view differs")
		}
	})
	t.Logf("accepted %v\nreached %v", accepted, reached)
	for typ := range registryChannelTypes() {
		if accepted[typ] == 0 {
			t.Errorf("the generator never got a %s accepted", typ)
		}
	}
	for _, k := range []string{"PCHANNEL_ASSIGNING", "PCHANNEL_ASSIGNED", "PCHANNEL_UNAVAILABLE", "two histories",
		"NODE_UP", "NODE_DRAINING", "NODE_DOWN", "secondary", "collections"} {
		if reached[k] == 0 {
			t.Errorf("no generated log ended with %s", k)
		}
	}
}

// registryChannelTypes lists the channel command types.
func registryChannelTypes() map[commands.Type]bool {
	out := map[commands.Type]bool{}
	for typ := range handlers {
		if typ >= commands.TypeInitStreaming && typ < 0x0200 {
			out[typ] = true
		}
	}
	return out
}
