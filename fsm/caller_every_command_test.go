package fsm

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// The per-node identity rule (docs/security.md#per-node-identity) is one
// check, checkCaller, applied to every command sessionOf lists. A mistake
// that drops one command from that list leaves the others passing, so the
// rule is tested here once per listed command, not once for the list.

// boundIdentity is the node credential that registers session 1 in these
// tests; otherIdentity is a valid credential of some other node.
const (
	boundIdentity = 7
	otherIdentity = 8
)

// perNodeCommand is one command of sessionOf's list, speaking for session
// 1, with a setup in which session 1's own credential gets it accepted.
type perNodeCommand struct {
	setup  []commands.Command
	cmd    commands.Command
	strict bool // only a node sends it: an unstamped one is refused too
}

// perNodeCommands holds one valid command of each type sessionOf lists.
// TestPerNodeListIsCoveredByTheTable keeps the two in step.
func perNodeCommands() map[commands.Type]perNodeCommand {
	syncUp := concat(base(), assigned(p0, 1), assigned(p1, 1), []commands.Command{
		createB("CreateIndex", withTargets(v15), func(b *logpb.CreateBroadcast) { b.AckSyncUp = true })})
	return map[commands.Type]perNodeCommand{
		commands.TypeSaveBinlogPaths: {
			setup: segBase(createSeg(v0, 1, 2)), cmd: save(1, 50, 10, 100), strict: true},
		commands.TypeUpdateChannelCheckpoints: {
			setup: segBase(), strict: true,
			cmd: cmd(&logpb.UpdateChannelCheckpoints{NodeId: 1, Checkpoints: []*logpb.ChannelCheckpointUpdate{
				{Vchannel: v0, PchannelTerm: 2, Position: wpos(2, 1, 100)}}})},
		commands.TypeCreateImportSegment: {
			setup: segBase(), cmd: createImport(v0, 1, 2), strict: true},
		commands.TypeFinishImportSegment: {
			setup: importBase(), cmd: finishImport(1, mptr(1, 1), 10), strict: true},
		commands.TypeAckBroadcast: {
			setup: syncUp, cmd: ackFrom(1, 1, 2, cpt(v15, 2, 7, 70)), strict: true},
		commands.TypeMarkStreamingNodeDown: {
			setup: base(), cmd: markDown(1, 2, "deregistered")},
		commands.TypeSetStreamingNodeDrain: {
			setup: base(), cmd: drain(1, true, "drained by its node")},
	}
}

// bindSession1 returns setup with its first registration (session 1) made
// by node credential boundIdentity, and the setup's own commands for
// session 1 stamped with it, as the API stamps them. The input is left as
// it was.
func bindSession1(t *testing.T, setup []commands.Command) []commands.Command {
	t.Helper()
	out := slices.Clone(setup)
	registered := false
	for i, c := range out {
		if r, ok := c.Body.(*logpb.RegisterStreamingNode); ok && !registered {
			r = proto.Clone(r).(*logpb.RegisterStreamingNode)
			r.BoundNode = boundIdentity
			out[i].Body = r
			registered = true
		}
		if node, _, ok := sessionOf(c.Body); ok && node == 1 {
			out[i].CallerNode = boundIdentity
		}
	}
	if !registered {
		t.Fatal("the setup registers no streaming node")
	}
	return out
}

func stampedBy(c commands.Command, identity uint64) commands.Command {
	c.CallerNode = identity
	return c
}

// TestEveryPerNodeCommandChecksTheCaller: for each command a streaming
// node's call proposes for its session, Apply accepts it stamped with the
// credential that registered the session and refuses it, changing nothing,
// stamped with another node's credential; a node-only command is refused
// unstamped as well, while drain and down (which the leader and operators
// also propose unstamped) pass unstamped.
func TestEveryPerNodeCommandChecksTheCaller(t *testing.T) {
	permission := rejected(logpb.RejectCode_REJECT_PERMISSION)
	for typ, pc := range perNodeCommands() {
		t.Run(typ.String(), func(t *testing.T) {
			setup := bindSession1(t, pc.setup)
			// The owner's own credential: accepted, so a refusal below is the
			// identity check and not something else wrong with the command.
			runAccepted(t, setup, stampedBy(pc.cmd, boundIdentity))
			runApplyCases(t, []applyCase{{
				name: "another node's credential", setup: setup, cmd: stampedBy(pc.cmd, otherIdentity),
				want: permission, wantMsg: "proposed for node identity 8",
			}})
			if pc.strict {
				runApplyCases(t, []applyCase{{
					name: "no credential", setup: setup, cmd: pc.cmd,
					want: permission, wantMsg: "needs the credential of node identity 7",
				}})
			} else {
				runAccepted(t, setup, pc.cmd)
			}
		})
	}
}

// runAccepted applies setup and then c, which must not be rejected.
func runAccepted(t *testing.T, setup []commands.Command, c commands.Command) {
	t.Helper()
	s := build(t, setup...)
	_, results := mustApply(t, s, c)
	if r := results[0].GetRejection(); r != nil {
		t.Fatalf("%s stamped by identity %d was rejected: %v", c.Type, c.CallerNode, r)
	}
}

// TestPerNodeListIsCoveredByTheTable: the commands sessionOf treats as
// speaking for a node are exactly those perNodeCommands tests, so a
// command added to the list without a case here, or a case whose command
// left the list, fails. Every command body of the log is probed with its
// node fields set.
func TestPerNodeListIsCoveredByTheTable(t *testing.T) {
	table := perNodeCommands()
	var listed []commands.Type
	msgs := logpb.File_log_proto.Messages()
	for i := 0; i < msgs.Len(); i++ {
		body := newBody(t, msgs.Get(i))
		typ, ok := commands.TypeOf(body)
		if !ok {
			continue
		}
		m := body.ProtoReflect()
		for _, name := range []protoreflect.Name{"node_id", "from_node"} {
			if f := m.Descriptor().Fields().ByName(name); f != nil && f.Kind() == protoreflect.Uint64Kind {
				m.Set(f, protoreflect.ValueOfUint64(1))
			}
		}
		if _, _, ok := sessionOf(body); ok {
			listed = append(listed, typ)
		}
	}
	if len(listed) == 0 {
		t.Fatal("sessionOf lists no command: the probe is broken")
	}
	for _, typ := range listed {
		if _, ok := table[typ]; !ok {
			t.Errorf("%s speaks for a node session but perNodeCommands has no case for it", typ)
		}
	}
	for typ := range table {
		if !slices.Contains(listed, typ) {
			t.Errorf("perNodeCommands tests %s, which sessionOf does not list", typ)
		}
	}
}

// newBody makes an empty message of descriptor d, of its generated type.
func newBody(t *testing.T, d protoreflect.MessageDescriptor) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(d.FullName())
	if err != nil {
		t.Fatalf("%s: %v", d.FullName(), err)
	}
	return mt.New().Interface()
}
