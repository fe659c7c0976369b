package scenario

import (
	"flag"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/coordd/coordd/client"
	"github.com/coordd/coordd/jepsen-style-tests/harness"
	"github.com/coordd/coordd/jepsen-style-tests/history"
	"github.com/coordd/coordd/jepsen-style-tests/nemesis"
)

// hostileConfig gives the hostile nemesis every credential a run has
// that is not the owning streaming node's: the read, proxy and admin
// tokens and each streaming node's own certificate (used only against
// PChannels another node owns). Its history clients come after the
// workloads' (clientBase).
func hostileConfig(cl *harness.Cluster, sns *harness.StreamingNodes, rec *history.Recorder, seed uint64, d time.Duration,
	clientBase int) nemesis.HostileConfig {
	sec := cl.Security()
	dialNode := func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, sec.StreamingNodeDialOptions()...)
	}
	cred := func(name, role string) nemesis.HostileCred {
		return nemesis.HostileCred{Name: name, DialNode: dialNode,
			Config: func(c client.Config) client.Config { return sec.ClientConfig(role, c) }}
	}
	creds := []nemesis.HostileCred{cred("read", harness.RoleRead), cred("proxy", harness.RoleProxy), cred("admin", harness.RoleAdmin)}
	for i := 0; sec != nil && sns != nil && i < sns.N(); i++ {
		tlsCfg := sec.NodeTLS(i)
		dialAsNode := func(addr string) (*grpc.ClientConn, error) {
			return grpc.NewClient(addr, client.StreamingNodeDialOptions(tlsCfg)...) // presenting the node's own certificate
		}
		creds = append(creds, nemesis.HostileCred{Name: "node-" + sns.ID(i), DialNode: dialAsNode, NodeAddr: sns.Addr(i),
			Config: func(c client.Config) client.Config { c.TLS = tlsCfg; return c }})
	}
	return nemesis.HostileConfig{Seed: seed, Duration: d, Endpoints: cl.Endpoints(0), Creds: creds,
		Observer: cred("read", harness.RoleRead), Recorder: rec, ClientID: clientBase, Logf: cl.Logf}
}

// OwnerBound is how long a PChannel may go without a working owner under
// the cluster's configuration in args: the node TTL (a lost owner is
// noticed when its session ends) plus one balance round (then it is
// reassigned), plus 2 s for the assignment round trip and the observer's
// sampling on a loaded machine.
func OwnerBound(args []string) time.Duration {
	fs := flag.NewFlagSet("coordd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	ttl := fs.Duration("node-ttl", 10*time.Second, "")
	balance := fs.Duration("balance-interval", time.Minute, "") // coordd's defaults
	var rest []string
	for i := 0; i < len(args); i++ { // only the two flags matter; keep each with its value
		if (args[i] == "--node-ttl" || args[i] == "--balance-interval") && i+1 < len(args) {
			rest = append(rest, args[i], args[i+1])
			i++
		}
	}
	_ = fs.Parse(rest)
	return *ttl + *balance + 2*time.Second
}
