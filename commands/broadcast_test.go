package commands

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// ---- fixtures -------------------------------------------------------------------

const (
	bcCChannel = pc0 + vocab.CChannelSuffix
	bcVChannel = pc1 + "_449326211v0"
)

func rk(domain logpb.ResourceDomain, key string, shared bool) *logpb.ResourceKey {
	return &logpb.ResourceKey{Domain: domain, Key: key, Shared: shared}
}

const (
	rkCluster    = logpb.ResourceDomain_RK_CLUSTER
	rkPrivilege  = logpb.ResourceDomain_RK_PRIVILEGE
	rkDB         = logpb.ResourceDomain_RK_DB_NAME
	rkCollection = logpb.ResourceDomain_RK_COLLECTION_NAME
	rkSnapshot   = logpb.ResourceDomain_RK_SNAPSHOT_NAME
	rkImportJob  = logpb.ResourceDomain_RK_IMPORT_JOB_ID
)

// createBC is a valid CreateBroadcast edited by edit.
func createBC(edit func(b *logpb.CreateBroadcast)) *logpb.CreateBroadcast {
	b := &logpb.CreateBroadcast{
		MessageType:  "CreateIndex",
		Payload:      []byte("opaque"),
		ResourceKeys: []*logpb.ResourceKey{rk(rkDB, "default", true), rk(rkCollection, "default:books", false)},
		Vchannels:    []string{bcCChannel, bcVChannel},
	}
	edit(b)
	return b
}

// targetNames returns n distinct, valid target names (pchannels).
func targetNames(n int) []string { return pchannels(n) }

// mustScoped returns a function unwrapping a scoped-key constructor's
// result: mustScoped(t)(vocab.ClusterScopedKey("k")).
func mustScoped(t testing.TB) func(string, error) string {
	return func(s string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("scoped key constructor: %v", err)
		}
		return s
	}
}

// ---- CreateBroadcast ---------------------------------------------------------------

func TestValidateCreateBroadcastMessageType(t *testing.T) {
	set := func(mt string) *logpb.CreateBroadcast {
		return createBC(func(b *logpb.CreateBroadcast) { b.MessageType = mt })
	}
	runValidateCases(t, []validateCase{
		{"ok", set("CreateIndex"), ""},
		{"every allowed character", set("azAZ09_"), ""},
		{"one byte", set("X"), ""},
		{"64 bytes", set(strings.Repeat("m", vocab.MaxBroadcastMessageType)), ""},
		{"built-in type", set(vocab.MsgFlushAll), ""},
		{"empty", set(""), "message type must be 1..64 bytes, got 0"},
		{"65 bytes", set(strings.Repeat("m", vocab.MaxBroadcastMessageType+1)), "got 65"},
		{"dash", set("Create-Index"), `character '-' not allowed`},
		{"space", set("Create Index"), `character ' ' not allowed`},
		{"dot", set("v1.Create"), `character '.' not allowed`},
		{"slash", set("a/b"), `character '/' not allowed`},
		{"NUL (the scope separator)", set("a\x00b"), "not allowed"},
		{"non-ASCII", set("Créer"), "not allowed"},
	})
}

func TestValidateCreateBroadcastPayload(t *testing.T) {
	set := func(n int) *logpb.CreateBroadcast {
		return createBC(func(b *logpb.CreateBroadcast) { b.Payload = make([]byte, n) })
	}
	runValidateCases(t, []validateCase{
		{"empty payload", set(0), ""},
		{"at the limit", set(vocab.MaxBroadcastPayload), ""},
		{"one byte over", set(vocab.MaxBroadcastPayload + 1), fmt.Sprintf("payload is %d bytes (max %d)", vocab.MaxBroadcastPayload+1, vocab.MaxBroadcastPayload)},
	})
}

func TestValidateCreateBroadcastResourceKeys(t *testing.T) {
	keys := func(ks ...*logpb.ResourceKey) *logpb.CreateBroadcast {
		return createBC(func(b *logpb.CreateBroadcast) { b.ResourceKeys = ks })
	}
	many := func(n int) *logpb.CreateBroadcast {
		var ks []*logpb.ResourceKey
		for i := 0; i < n; i++ {
			ks = append(ks, rk(rkCollection, "db:c"+strconv.Itoa(i), i%2 == 0))
		}
		return keys(ks...)
	}
	key512 := strings.Repeat("k", vocab.MaxResourceKeyBytes)
	key513 := strings.Repeat("k", vocab.MaxResourceKeyBytes+1)
	tests := []validateCase{
		{"no keys", keys(), ""},
		{"shared cluster", keys(rk(rkCluster, "", true)), ""},
		{"exclusive cluster", keys(rk(rkCluster, "", false)), ""},
		{"privilege", keys(rk(rkPrivilege, "", false)), ""},
		{"64 keys", many(vocab.MaxResourceKeys), ""},
		{"65 keys", many(vocab.MaxResourceKeys + 1), "65 resource keys (max 64)"},
		{"duplicates are merged later, not refused", keys(rk(rkDB, "d", true), rk(rkDB, "d", false)), ""},
		{"cluster with a key", keys(rk(rkCluster, "x", true)), "domain CLUSTER takes no key"},
		{"privilege with a key", keys(rk(rkPrivilege, "admin", false)), "domain PRIVILEGE takes no key"},
		{"unknown domain 0", keys(rk(logpb.ResourceDomain_RK_UNKNOWN, "x", true)), `unknown resource key domain "0"`},
		{"unknown domain 6", keys(rk(6, "x", true)), `unknown resource key domain "6"`},
		{"unknown domain 126", keys(rk(126, "", true)), `unknown resource key domain "126"`},
		{"unknown domain 128", keys(rk(128, "", true)), `unknown resource key domain "128"`},
		{"negative domain", keys(rk(-1, "x", true)), `unknown resource key domain "-1"`},
		{"second key bad", keys(rk(rkDB, "d", true), rk(rkCluster, "c", true)), "takes no key"},
	}
	for _, d := range []logpb.ResourceDomain{rkDB, rkCollection, rkSnapshot, rkImportJob} {
		tests = append(tests,
			validateCase{d.String() + "/one byte", keys(rk(d, "k", false)), ""},
			validateCase{d.String() + "/512 bytes", keys(rk(d, key512, true)), ""},
			validateCase{d.String() + "/empty", keys(rk(d, "", true)), "resource key " + string(ResourceDomainOf(d)) + " needs a key of 1..512 bytes"},
			validateCase{d.String() + "/513 bytes", keys(rk(d, key513, false)), "resource key " + string(ResourceDomainOf(d)) + " needs a key of 1..512 bytes"},
		)
	}
	runValidateCases(t, tests)
}

func TestValidateCreateBroadcastTargets(t *testing.T) {
	targets := func(vs ...string) *logpb.CreateBroadcast {
		return createBC(func(b *logpb.CreateBroadcast) { b.Vchannels = vs })
	}
	tests := []validateCase{
		{"cchannel only", targets(bcCChannel), ""},
		{"cchannel and vchannels", targets(bcCChannel, bcVChannel, pc2+"_1v3"), ""},
		{"pchannel names (cluster-level message)", targets(bcCChannel, pc1, pc2), ""},
		{"longest pchannel", targets(nameLongest), ""},
		{"4096 targets", targets(targetNames(vocab.MaxBroadcastTargets)...), ""},
		{"no targets", targets(), "a broadcast needs 1..4096 target channels, got 0"},
		{"4097 targets", targets(targetNames(vocab.MaxBroadcastTargets + 1)...), "got 4097"},
		{"duplicate vchannel", targets(bcCChannel, bcVChannel, bcVChannel), "target " + bcVChannel + " listed twice"},
		{"duplicate pchannel", targets(pc1, bcCChannel, pc1), "target " + pc1 + " listed twice"},
		{"duplicate cchannel", targets(bcCChannel, bcCChannel), "listed twice"},
		{"collection id 0", targets(bcCChannel, pc1+"_0v0"), "bad collection id"},
		{"shard with leading zero", targets(bcCChannel, pc1+"_12v01"), "bad shard index"},
		{"vchannel without shard", targets(bcCChannel, pc1+"_12x"), "want <pchannel>_<collectionID>v<shard>"},
		{"pchannel whose prefix ends in an index", targets(bcCChannel, pc1+"_12"), ""},
		{"vchannel on a bad pchannel", targets(bcCChannel, "p_01_12v0"), "bad pchannel part"},
		{"cchannel on a bad pchannel", targets("p_01" + vocab.CChannelSuffix), "pchannel name"},
		{"cchannel without separator", targets("dml_0vcchan"), "bad control channel name"},
	}
	for _, bad := range badPChannelNames {
		if bad.name == "control channel" || bad.name == "vchannel" {
			continue // valid targets
		}
		tests = append(tests, validateCase{"bad name/" + bad.name, targets(bcCChannel, bad.value), "name"})
	}
	runValidateCases(t, tests)
}

func TestValidateCreateBroadcastIdempotencyKey(t *testing.T) {
	ik := func(key string) *logpb.CreateBroadcast {
		return createBC(func(b *logpb.CreateBroadcast) { b.IdempotencyKey = key })
	}
	k256 := strings.Repeat("k", vocab.MaxIdempotencyKeyBytes)
	k257 := strings.Repeat("k", vocab.MaxIdempotencyKeyBytes+1)
	cluster := mustScoped(t)(vocab.ClusterScopedKey("retry-1"))
	db := mustScoped(t)(vocab.DatabaseScopedKey(1, "retry-1"))
	coll := mustScoped(t)(vocab.CollectionScopedKey(449326211, "a/b:c d~"))
	at256 := mustScoped(t)(vocab.CollectionScopedKey(1<<62, k256))
	runValidateCases(t, []validateCase{
		{"none", ik(""), ""},
		{"cluster scoped", ik(cluster), ""},
		{"database scoped", ik(db), ""},
		{"collection scoped, separators inside the key", ik(coll), ""},
		{"256-byte key", ik(at256), ""},
		{"literal canonical form", ik("coll/7/3:abc"), ""},
		{"raw key", ik("retry-1"), "is not scoped"},
		{"raw key with a colon", ik("retry:1"), "is not scoped"},
		{"unknown scope", ik("tenant/1/1:a"), "is not scoped"},
		{"scope in upper case", ik("DB/1/1:a"), "is not scoped"},
		{"cluster scope with an id", ik("cluster/1/1:a"), "malformed scope"},
		{"database id 0", ik("db/0/1:a"), "malformed scope"},
		{"collection id 0", ik("coll/0/1:a"), "malformed scope"},
		{"negative id", ik("db/-1/1:a"), "malformed scope"},
		{"id not a number", ik("db/x/1:a"), "malformed scope"},
		{"id missing", ik("db//1:a"), "malformed scope"},
		{"no id separator", ik("db/1:a"), "malformed scope"},
		{"no length separator", ik("db/1/1a"), "malformed scope"},
		{"id with plus sign", ik("db/+1/1:a"), "not in canonical form"},
		{"id with leading zero", ik("coll/07/1:a"), "not in canonical form"},
		{"cluster id -0", ik("cluster/-0/1:a"), "not in canonical form"},
		{"length too small", ik("db/1/1:ab"), "length prefix does not match"},
		{"length too large", ik("db/1/3:ab"), "length prefix does not match"},
		{"length not a number", ik("db/1/x:a"), "length prefix does not match"},
		{"length with leading zero", ik("db/1/01:a"), "not in canonical form"},
		{"length with plus sign", ik("db/1/+1:a"), "not in canonical form"},
		{"empty client key", ik("db/1/0:"), "idempotency key must be 1..256 bytes, got 0"},
		{"257-byte client key", ik("db/1/257:" + k257), "got 257"},
		{"non-printable client key", ik("db/1/3:a\x01b"), "not printable ASCII"},
		{"DEL in client key", ik("db/1/1:\x7f"), "not printable ASCII"},
		{"newline in client key", ik("cluster/0/2:a\n"), "not printable ASCII"},
	})
}

func TestValidateCreateBroadcastPredecessors(t *testing.T) {
	after := func(ids ...uint64) *logpb.CreateBroadcast {
		return createBC(func(b *logpb.CreateBroadcast) { b.AfterBroadcasts = ids })
	}
	many := make([]uint64, MaxBroadcastPredecessors+1)
	for i := range many {
		many[i] = uint64(i + 1)
	}
	runValidateCases(t, []validateCase{
		{"none", after(), ""},
		{"one", after(7), ""},
		{"at the bound", after(many[:MaxBroadcastPredecessors]...), ""},
		{"over the bound", after(many...), "at most 64 tasks, got 65"},
		{"zero id", after(7, 0), "must be positive"},
		{"listed twice", after(7, 8, 7), "listed twice"},
	})
}

// ---- Ack / Complete / Abandon / Prune -------------------------------------------------

func TestValidateAckBroadcast(t *testing.T) {
	cp := func(v string, term int64, offset, tt uint64) *logpb.VChannelCheckpoint {
		return &logpb.VChannelCheckpoint{Vchannel: v, Term: term, Offset: offset, TimeTick: tt}
	}
	ack := func(id uint64, cps ...*logpb.VChannelCheckpoint) *logpb.AckBroadcast {
		return &logpb.AckBroadcast{BroadcastId: id, Checkpoints: cps}
	}
	many := func(n int) *logpb.AckBroadcast {
		b := ack(1)
		for _, p := range targetNames(n) {
			b.Checkpoints = append(b.Checkpoints, cp(p, 1, 0, 1))
		}
		return b
	}
	runValidateCases(t, []validateCase{
		{"ok", ack(7, cp(bcCChannel, 1, 0, 1)), ""},
		{"several, offset 0 allowed", ack(7, cp(bcCChannel, 3, 0, 99), cp(bcVChannel, 1, 12, 100), cp(pc2, 9, 1, 1)), ""},
		{"4096 checkpoints", many(vocab.MaxBroadcastTargets), ""},
		{"large values", ack(1<<63, cp(bcVChannel, 1<<62, 1<<63, 1<<63)), ""},
		{"no id", ack(0, cp(bcCChannel, 1, 0, 1)), "ack needs a broadcast id"},
		{"no checkpoints", ack(7), "ack needs a broadcast id and 1..4096 checkpoints"},
		{"4097 checkpoints", many(vocab.MaxBroadcastTargets + 1), "1..4096 checkpoints"},
		{"term 0", ack(7, cp(bcCChannel, 0, 0, 1)), "checkpoint of " + bcCChannel + " needs a term >= 1 and a time tick"},
		{"negative term", ack(7, cp(bcCChannel, -1, 0, 1)), "needs a term >= 1"},
		{"time tick 0", ack(7, cp(bcVChannel, 1, 5, 0)), "checkpoint of " + bcVChannel + " needs a term >= 1 and a time tick"},
		{"second checkpoint bad", ack(7, cp(bcCChannel, 1, 0, 1), cp(bcVChannel, 1, 0, 0)), bcVChannel},
		{"bad vchannel", ack(7, cp("p_01_1v0", 1, 0, 1)), "name"},
		{"empty vchannel", ack(7, cp("", 1, 0, 1)), "name"},
		{"from a node session", &logpb.AckBroadcast{BroadcastId: 7, Checkpoints: []*logpb.VChannelCheckpoint{cp(bcCChannel, 1, 0, 1)}, FromNode: 3, FromEpoch: 9}, ""},
		{"node without epoch", &logpb.AckBroadcast{BroadcastId: 7, Checkpoints: []*logpb.VChannelCheckpoint{cp(bcCChannel, 1, 0, 1)}, FromNode: 3}, "both its node id and its epoch"},
		{"epoch without node", &logpb.AckBroadcast{BroadcastId: 7, Checkpoints: []*logpb.VChannelCheckpoint{cp(bcCChannel, 1, 0, 1)}, FromEpoch: 9}, "both its node id and its epoch"},
	})
}

func TestValidateCompleteAbandonPrune(t *testing.T) {
	runValidateCases(t, []validateCase{
		{"complete ok", &logpb.CompleteBroadcast{BroadcastId: 1}, ""},
		{"complete without id", &logpb.CompleteBroadcast{}, "broadcast id must be positive"},
		{"complete with checkpoints", &logpb.CompleteBroadcast{BroadcastId: 1, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: "by-dev-rootcoord-dml_0_vcchan", Term: 1, TimeTick: 7}}}, ""},
		{"complete with a checkpoint of term 0", &logpb.CompleteBroadcast{BroadcastId: 1, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: "by-dev-rootcoord-dml_0_vcchan", TimeTick: 7}}}, "needs a term >= 1"},
		{"complete with a bad channel name", &logpb.CompleteBroadcast{BroadcastId: 1, Checkpoints: []*logpb.VChannelCheckpoint{
			{Vchannel: "not a channel", Term: 1, TimeTick: 7}}}, "invalid"},

		{"abandon ok", &logpb.AbandonBroadcast{BroadcastId: 3, Reason: "operator"}, ""},
		{"abandon reason of 1024 bytes", &logpb.AbandonBroadcast{BroadcastId: 3, Reason: strings.Repeat("r", vocab.MaxReasonBytes)}, ""},
		{"abandon without id", &logpb.AbandonBroadcast{Reason: "x"}, "broadcast id must be positive"},
		{"abandon without reason", &logpb.AbandonBroadcast{BroadcastId: 3}, "abandoning a broadcast needs a reason"},
		{"abandon reason of 1025 bytes", &logpb.AbandonBroadcast{BroadcastId: 3, Reason: strings.Repeat("r", vocab.MaxReasonBytes+1)}, "reason is 1025 bytes (max 1024)"},

		{"prune ok", &logpb.PruneBroadcastTombstones{MaxCount: 8192, MaxLifetimeMs: 86_400_000}, ""},
		{"prune everything (max count 0)", &logpb.PruneBroadcastTombstones{MaxLifetimeMs: 1}, ""},
		{"prune lifetime 0", &logpb.PruneBroadcastTombstones{MaxCount: 1}, "tombstone lifetime must be positive"},
		{"prune negative lifetime", &logpb.PruneBroadcastTombstones{MaxCount: 1, MaxLifetimeMs: -1}, "tombstone lifetime must be positive"},
	})
}

func keyList(ks []*logpb.ResourceKey) string {
	var parts []string
	for _, k := range ks {
		mode := "X"
		if k.Shared {
			mode = "S"
		}
		parts = append(parts, fmt.Sprintf("%s/%s@%s", k.Domain, k.Key, mode))
	}
	return strings.Join(parts, " ")
}

func TestNormalizeResourceKeys(t *testing.T) {
	sharedCluster := rk(rkCluster, "", true)
	tests := []struct {
		name string
		in   []*logpb.ResourceKey
		want []*logpb.ResourceKey
	}{
		{"none gets the shared cluster key", nil, []*logpb.ResourceKey{sharedCluster}},
		{"collection DDL", []*logpb.ResourceKey{rk(rkCollection, "db:c", false), rk(rkDB, "db", true)},
			[]*logpb.ResourceKey{rk(rkCollection, "db:c", false), rk(rkDB, "db", true), sharedCluster}},
		{"exclusive cluster is not joined by a shared one", []*logpb.ResourceKey{rk(rkCluster, "", false)},
			[]*logpb.ResourceKey{rk(rkCluster, "", false)}},
		{"shared cluster given explicitly stays single", []*logpb.ResourceKey{rk(rkDB, "d", true), rk(rkCluster, "", true)},
			[]*logpb.ResourceKey{rk(rkDB, "d", true), sharedCluster}},
		{"exclusive cluster listed after shared wins", []*logpb.ResourceKey{rk(rkCluster, "", true), rk(rkCluster, "", false)},
			[]*logpb.ResourceKey{rk(rkCluster, "", false)}},
		{"shared then exclusive: exclusive wins", []*logpb.ResourceKey{rk(rkDB, "d", true), rk(rkDB, "d", false)},
			[]*logpb.ResourceKey{rk(rkDB, "d", false), sharedCluster}},
		{"exclusive then shared: exclusive wins", []*logpb.ResourceKey{rk(rkDB, "d", false), rk(rkDB, "d", true)},
			[]*logpb.ResourceKey{rk(rkDB, "d", false), sharedCluster}},
		{"shared twice stays shared", []*logpb.ResourceKey{rk(rkDB, "d", true), rk(rkDB, "d", true)},
			[]*logpb.ResourceKey{rk(rkDB, "d", true), sharedCluster}},
		{"same key in different domains is two keys", []*logpb.ResourceKey{rk(rkDB, "x", true), rk(rkCollection, "x", false)},
			[]*logpb.ResourceKey{rk(rkCollection, "x", false), rk(rkDB, "x", true), sharedCluster}},
		{"sorted by domain, then key",
			[]*logpb.ResourceKey{rk(rkPrivilege, "", false), rk(rkSnapshot, "1:s", true), rk(rkDB, "b", true), rk(rkDB, "a", false),
				rk(rkImportJob, "9", true), rk(rkCollection, "b:x", true), rk(rkCollection, "a:x", false)},
			[]*logpb.ResourceKey{rk(rkImportJob, "9", true), rk(rkCollection, "a:x", false), rk(rkCollection, "b:x", true),
				rk(rkDB, "a", false), rk(rkDB, "b", true), rk(rkPrivilege, "", false), rk(rkSnapshot, "1:s", true), sharedCluster}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := make([]*logpb.ResourceKey, len(tt.in))
			for i, k := range tt.in {
				before[i] = proto.Clone(k).(*logpb.ResourceKey)
			}
			got := NormalizeResourceKeys(tt.in)
			if keyList(got) != keyList(tt.want) {
				t.Fatalf("got  %s\nwant %s", keyList(got), keyList(tt.want))
			}
			for i := range tt.in {
				if !proto.Equal(tt.in[i], before[i]) {
					t.Fatalf("input key %d modified: %v -> %v", i, before[i], tt.in[i])
				}
				for _, g := range got {
					if g == tt.in[i] {
						t.Fatal("output aliases an input key")
					}
				}
			}
		})
	}
}

// TestNormalizeResourceKeysProperties: the output is strictly sorted by
// (domain, key), holds exactly the input identities plus a cluster key,
// each exclusive iff any input of that identity is, and normalizing again
// changes nothing.
func TestNormalizeResourceKeysProperties(t *testing.T) {
	domains := []logpb.ResourceDomain{rkCluster, rkPrivilege, rkDB, rkCollection, rkSnapshot, rkImportJob}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 10).Draw(t, "n")
		var in []*logpb.ResourceKey
		for i := 0; i < n; i++ {
			l := fmt.Sprintf("k%d", i)
			in = append(in, rk(rapid.SampledFrom(domains).Draw(t, l+".domain"),
				rapid.SampledFrom([]string{"", "a", "b", "a:b"}).Draw(t, l+".key"), rapid.Bool().Draw(t, l+".shared")))
		}
		got := NormalizeResourceKeys(in)
		exclusive := map[string]bool{}
		present := map[string]bool{}
		hasCluster := false
		for _, k := range in {
			id := ResourceKeyID(k)
			present[id] = true
			exclusive[id] = exclusive[id] || !k.Shared
			hasCluster = hasCluster || k.Domain == rkCluster
		}
		if !hasCluster {
			id := ResourceKeyID(rk(rkCluster, "", true))
			present[id] = true
		}
		if len(got) != len(present) {
			t.Fatalf("%d keys out for %d identities: %s", len(got), len(present), keyList(got))
		}
		for i, k := range got {
			if !present[ResourceKeyID(k)] {
				t.Fatalf("output key %s was not in the input", ResourceKeyID(k))
			}
			if k.Shared == exclusive[ResourceKeyID(k)] {
				t.Fatalf("key %s shared=%v, but exclusive in input=%v", ResourceKeyID(k), k.Shared, exclusive[ResourceKeyID(k)])
			}
			if i > 0 {
				p := got[i-1]
				if p.Domain > k.Domain || p.Domain == k.Domain && p.Key >= k.Key {
					t.Fatalf("not strictly sorted: %s", keyList(got))
				}
			}
		}
		if again := NormalizeResourceKeys(got); keyList(again) != keyList(got) {
			t.Fatalf("not idempotent: %s -> %s", keyList(got), keyList(again))
		}
	})
}

func TestResourceKeyIDIgnoresMode(t *testing.T) {
	if ResourceKeyID(rk(rkDB, "d", true)) != ResourceKeyID(rk(rkDB, "d", false)) {
		t.Fatal("shared and exclusive keys have different lock identities")
	}
	if ResourceKeyID(rk(rkDB, "d", true)) == ResourceKeyID(rk(rkCollection, "d", true)) {
		t.Fatal("keys of different domains share an identity")
	}
}

// ---- vocab.PChannelOf on broadcast targets -------------------------------------------------------

func TestPChannelOfBroadcastTargets(t *testing.T) {
	tests := []struct{ name, want string }{
		{pc0, pc0},
		{"dml_10", "dml_10"},
		{"a_b_3", "a_b_3"},
		{"a_1v2_3", "a_1v2_3"}, // a prefix that looks like a vchannel suffix
		{nameLongest, nameLongest},
		{vocab.CChannelName(pc0), pc0},
		{vocab.VChannelName(pc1, 449326211, 0), pc1},
		{vocab.VChannelName("a_1v2_3", 5, 1), "a_1v2_3"},
		{vocab.CChannelName("a_b_3"), "a_b_3"},
	}
	for _, tt := range tests {
		if got := vocab.PChannelOf(tt.name); got != tt.want {
			t.Errorf("vocab.PChannelOf(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	// For any valid pchannel: itself, its cchannel and its vchannels map to
	// it, and each is a valid broadcast target.
	rapid.Check(t, func(t *rapid.T) {
		prefix := rapid.StringOfN(rapid.RuneFrom([]rune("ab1v_-")), 1, 12, -1).Draw(t, "prefix")
		if vocab.ValidatePrefix(prefix) != nil {
			t.Skip("invalid prefix")
		}
		p := vocab.PChannelName(prefix, rapid.IntRange(0, 1<<31-1).Draw(t, "index"))
		if vocab.ValidatePChannelName(p) != nil {
			t.Skip("invalid pchannel")
		}
		v := vocab.VChannelName(p, rapid.Int64Range(1, 1<<62).Draw(t, "coll"), rapid.IntRange(0, vocab.MaxVChannelsPerColl-1).Draw(t, "shard"))
		for _, name := range []string{p, vocab.CChannelName(p), v} {
			if got := vocab.PChannelOf(name); got != p {
				t.Fatalf("vocab.PChannelOf(%q) = %q, want %q", name, got, p)
			}
			if err := vocab.ValidateBroadcastTarget(name); err != nil {
				t.Fatalf("vocab.ValidateBroadcastTarget(%q): %v", name, err)
			}
		}
	})
}

// TestBuiltinMessageTypesValid: the built-in message types pass the
// message-type validator (a typo here would make them unusable).
func TestBuiltinMessageTypesValid(t *testing.T) {
	for _, mt := range []string{vocab.MsgCreateCollection, vocab.MsgDropCollection, vocab.MsgAlterReplicateConfig, vocab.MsgFlushAll} {
		if err := vocab.ValidateMessageType(mt); err != nil {
			t.Errorf("%s: %v", mt, err)
		}
	}
	// The fixed sample's idempotency key is constructor output.
	want := mustScoped(t)(vocab.DatabaseScopedKey(1, "create-books"))
	if got := fixedSamples[TypeCreateBroadcast]().(*logpb.CreateBroadcast).IdempotencyKey; got != want {
		t.Fatalf("sample key %q, constructor gives %q", got, want)
	}
}
