package channels

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/api/coordpb"
	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/controller/broadcaster"
	"github.com/coordd/coordd/controller/controllertest"
	"github.com/coordd/coordd/vocab"
)

// twoClusters is a configuration this test cluster can take: it is the
// primary of by-dev2.
func twoClusters(t *testing.T, extra ...string) ReplicateConfig {
	t.Helper()
	own := append([]string{testP0, testP1}, extra...)
	var other []string
	for i := range own {
		other = append(other, "by-dev2-dml_"+string(rune('0'+i)))
	}
	c, err := NewReplicateConfig(&coordpb.ReplicateConfiguration{
		Clusters: []*coordpb.ReplicateCluster{{ClusterId: testCluster, Pchannels: own}, {ClusterId: "by-dev2", Pchannels: other}},
		Topology: []*coordpb.ReplicateTopology{{SourceClusterId: testCluster, TargetClusterId: "by-dev2"}}})
	if err != nil {
		t.Fatalf("NewReplicateConfig: %v", err)
	}
	return c
}

// installing answers a broadcast the way its callback would: it commits
// the configuration it carries.
func installing(t *testing.T, l *controllertest.Leader) func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error) {
	return func(ctx context.Context, req broadcaster.Request) (broadcaster.Result, error) {
		var cfg logpb.ReplicateConfiguration
		if err := proto.Unmarshal(req.Payload, &cfg); err != nil {
			return broadcaster.Result{}, err
		}
		l.MustPropose(t, &logpb.UpdateReplicateConfiguration{Config: &cfg})
		return broadcaster.Result{BroadcastID: 7}, nil
	}
}

// TestUpdateReplicateConfigurationDecisions: a valid configuration is one
// AlterReplicateConfig broadcast under the exclusive Cluster key; an equal
// one is done without a broadcast; one this cluster cannot take is
// invalid; a broadcast that does not install it is ErrNotInstalled; a
// secondary refuses with ErrSecondary. None of the refusals broadcasts.
func TestUpdateReplicateConfigurationDecisions(t *testing.T) {
	fb := &fakeBroadcasts{}
	s, l := newTestService(t, fb, nil)
	fb.answer = installing(t, l)
	ctx := l.Deadline()
	cfg := twoClusters(t)
	if err := s.UpdateReplicateConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	reqs := fb.requests()
	if len(reqs) != 1 || reqs[0].MessageType != vocab.MsgAlterReplicateConfig || len(reqs[0].ResourceKeys) != 1 ||
		!proto.Equal(reqs[0].ResourceKeys[0], &logpb.ResourceKey{Domain: logpb.ResourceDomain_RK_CLUSTER}) {
		t.Fatalf("broadcasts %+v, want one AlterReplicateConfig under the exclusive Cluster key", reqs)
	}
	if got := l.State().ReplicateConfiguration(); !proto.Equal(got, cfg.Config()) {
		t.Fatalf("installed %v, want %v", got, cfg.Config())
	}

	// Equal: done at once.
	if err := s.UpdateReplicateConfiguration(ctx, twoClusters(t)); err != nil {
		t.Fatalf("equal configuration: %v", err)
	}
	// This cluster cannot take it: a PChannel it does not have.
	unknown := twoClusters(t, "by-dev-rootcoord-dml_9")
	if err := s.UpdateReplicateConfiguration(ctx, unknown); !errors.Is(err, commands.ErrInvalid) ||
		!strings.Contains(err.Error(), "which this cluster does not have") {
		t.Fatalf("unknown pchannel: %v, want ErrInvalid", err)
	}
	if n := len(fb.requests()); n != 1 {
		t.Fatalf("%d broadcasts after the equal and the invalid one, want still 1", n)
	}

	// The broadcast completes without installing it.
	l.MustPropose(t, &logpb.AddPChannels{Pchannels: []string{"by-dev-rootcoord-dml_2"}})
	fb.answer = nil
	if err := s.UpdateReplicateConfiguration(ctx, twoClusters(t, "by-dev-rootcoord-dml_2")); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("not installed: %v, want ErrNotInstalled", err)
	}
	// A broadcaster error is returned as is.
	lockErr := &broadcaster.LockTimeoutError{Key: "Cluster@X", Waited: time.Second, Err: context.DeadlineExceeded}
	fb.answer = func(context.Context, broadcaster.Request) (broadcaster.Result, error) {
		return broadcaster.Result{}, lockErr
	}
	if err := s.UpdateReplicateConfiguration(ctx, twoClusters(t, "by-dev-rootcoord-dml_2")); !errors.Is(err, lockErr) {
		t.Fatalf("broadcaster error: %v", err)
	}

}

// TestUpdateReplicateConfigurationOnSecondary: a secondary refuses at
// once with ErrSecondary, naming the way out, and broadcasts nothing.
func TestUpdateReplicateConfigurationOnSecondary(t *testing.T) {
	fb := &fakeBroadcasts{}
	s, l := newTestService(t, fb, nil)
	l.MustPropose(t, &logpb.UpdateReplicateConfiguration{Config: secondaryConfig()})
	if err := s.UpdateReplicateConfiguration(l.Deadline(), twoClusters(t)); !errors.Is(err, ErrSecondary) || !strings.Contains(err.Error(), "ResetReplicateRole") {
		t.Fatalf("on a secondary: %v, want ErrSecondary naming ResetReplicateRole", err)
	}
	if n := len(fb.requests()); n != 0 {
		t.Fatalf("a secondary broadcast %d times", n)
	}
}

// secondaryConfig makes the test cluster a secondary of "dr".
func secondaryConfig() *logpb.ReplicateConfiguration {
	return &logpb.ReplicateConfiguration{
		Clusters: []*logpb.ReplicateCluster{{ClusterId: testCluster, Pchannels: []string{testP0, testP1}},
			{ClusterId: "dr", Pchannels: []string{"dr_0", "dr_1"}}},
		Topology: []*logpb.ReplicateTopology{{SourceClusterId: "dr", TargetClusterId: testCluster}},
	}
}

// TestUpdateReplicateConfigurationWithoutBroadcaster: a member without a
// broadcaster commits the configuration directly.
func TestUpdateReplicateConfigurationWithoutBroadcaster(t *testing.T) {
	s, l := newTestService(t, nil, nil)
	cfg := twoClusters(t)
	if err := s.UpdateReplicateConfiguration(l.Deadline(), cfg); err != nil {
		t.Fatal(err)
	}
	if got := controllertest.AppliedOf[*logpb.UpdateReplicateConfiguration](l); len(got) != 1 || !proto.Equal(got[0].Config, cfg.Config()) {
		t.Fatalf("committed %v, want the configuration once", got)
	}
}

// TestResetReplicateRole: a secondary becomes the primary of a
// configuration listing only itself; a primary is refused by Apply.
func TestResetReplicateRole(t *testing.T) {
	s, l := newTestService(t, nil, nil)
	r, err := NewResetRole(&coordpb.ResetReplicateRoleRequest{Reason: "primary site lost"})
	if err != nil {
		t.Fatal(err)
	}
	var rej *commands.RejectedError
	if _, err := s.ResetReplicateRole(l.Deadline(), r); !errors.As(err, &rej) {
		t.Fatalf("reset on a primary: %v, want a refusal", err)
	}
	l.MustPropose(t, &logpb.UpdateReplicateConfiguration{Config: secondaryConfig()})
	res, err := s.ResetReplicateRole(l.Deadline(), r)
	if err != nil {
		t.Fatal(err)
	}
	want := &logpb.ReplicateConfiguration{Clusters: []*logpb.ReplicateCluster{{ClusterId: testCluster, Pchannels: []string{testP0, testP1}}}}
	if res.ClusterID != testCluster || !proto.Equal(res.Config, want) || !l.State().IsPrimary() {
		t.Fatalf("reset: %+v (primary %v), want %v", res, l.State().IsPrimary(), want)
	}
	if _, err := NewResetRole(&coordpb.ResetReplicateRoleRequest{}); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("reset without a reason: %v, want ErrInvalid", err)
	}
}

// TestReplicateConfigShapes: the API's and the log's configuration
// messages have the same fields (number, name, kind, cardinality), so
// convertShape loses nothing, and a configuration survives the round trip.
func TestReplicateConfigShapes(t *testing.T) {
	pairs := [][2]proto.Message{
		{&coordpb.ReplicateConfiguration{}, &logpb.ReplicateConfiguration{}},
		{&coordpb.ReplicateCluster{}, &logpb.ReplicateCluster{}},
		{&coordpb.ReplicateTopology{}, &logpb.ReplicateTopology{}},
	}
	for _, p := range pairs {
		a, b := p[0].ProtoReflect().Descriptor().Fields(), p[1].ProtoReflect().Descriptor().Fields()
		if a.Len() != b.Len() {
			t.Fatalf("%T has %d fields, %T %d", p[0], a.Len(), p[1], b.Len())
		}
		for i := 0; i < a.Len(); i++ {
			fa, fb := a.Get(i), b.ByNumber(a.Get(i).Number())
			if fb == nil || fa.Name() != fb.Name() || fa.Kind() != fb.Kind() || fa.Cardinality() != fb.Cardinality() || fa.IsMap() {
				t.Errorf("%T field %s has no twin of the same shape in %T", p[0], fa.Name(), p[1])
			}
		}
	}
	api := &coordpb.ReplicateConfiguration{
		Clusters: []*coordpb.ReplicateCluster{{ClusterId: "a", Pchannels: []string{"a_0", "a_1"}}, {ClusterId: "b", Pchannels: []string{"b_0", "b_1"}}},
		Topology: []*coordpb.ReplicateTopology{{SourceClusterId: "a", TargetClusterId: "b"}}}
	cfg, err := NewReplicateConfig(api)
	if err != nil {
		t.Fatal(err)
	}
	want := &logpb.ReplicateConfiguration{
		Clusters: []*logpb.ReplicateCluster{{ClusterId: "a", Pchannels: []string{"a_0", "a_1"}}, {ClusterId: "b", Pchannels: []string{"b_0", "b_1"}}},
		Topology: []*logpb.ReplicateTopology{{SourceClusterId: "a", TargetClusterId: "b"}}}
	if !proto.Equal(cfg.Config(), want) {
		t.Fatalf("log form %v, want %v", cfg.Config(), want)
	}
	if back := APIReplicateConfig(cfg.Config()); !proto.Equal(back, api) {
		t.Fatalf("API form %v, want %v", back, api)
	}
	if APIReplicateConfig(nil) != nil {
		t.Fatal("no configuration shows as one")
	}
	if _, err := NewReplicateConfig(nil); !errors.Is(err, commands.ErrInvalid) {
		t.Fatalf("no configuration: %v, want ErrInvalid", err)
	}
}
