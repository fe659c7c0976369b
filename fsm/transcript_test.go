package fsm

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

// TestTranscripts replays the command sequences in testdata/transcripts/
// (docs/architecture.md#testing): each file is a story of the state machine
// told as commands and what they answered, one directive at a time:
//
//	apply <Type> [term=N] [request=ID] [at=MS]
//	<the command body in protobuf text format>
//	----
//	<the result: "ok" and its value, or "refused <code>: <message>">
//
//	show <pchannels|nodes|broadcasts|segments|checkpoints|collections|leader>
//	show manifest <segment id>
//	----
//	<that part of the state, one record a line>
//
// Each apply is one log entry at the next index; after it the invariants
// must hold and the new state must succeed the old (Successor), or the
// transcript fails with the reason. Rewrite the expected output after a
// deliberate change with
//
//	go test -tags hashicorpmetrics ./fsm -run TestTranscripts -rewrite
//
// and read the diff: every changed line is a changed behaviour.
func TestTranscripts(t *testing.T) {
	datadriven.Walk(t, "testdata/transcripts", func(t *testing.T, path string) {
		s := New()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "apply":
				next, out := transcriptApply(t, s, d)
				s = next
				return out
			case "show":
				return transcriptShow(t, s, d)
			}
			d.Fatalf(t, "unknown directive %q (apply, show)", d.Cmd)
			return ""
		})
	})
}

// transcriptApply applies the directive's command as the next entry.
func transcriptApply(t *testing.T, s *State, d *datadriven.TestData) (*State, string) {
	if len(d.CmdArgs) == 0 {
		d.Fatalf(t, "apply needs a command type, e.g. apply AssignPChannels")
	}
	typ := d.CmdArgs[0].Key
	mt, err := protoregistry.GlobalTypes.FindMessageByName(logpb.File_log_proto.Package().Append(protoreflect.Name(typ)))
	if err != nil {
		d.Fatalf(t, "no log command %q: %v", typ, err)
	}
	body := mt.New().Interface()
	if err := prototext.Unmarshal([]byte(d.Input), body); err != nil {
		d.Fatalf(t, "%s body: %v", typ, err)
	}
	c, err := commands.New(body, "")
	if err != nil {
		return s, "not proposable: " + err.Error() + "\n"
	}
	for _, a := range d.CmdArgs[1:] {
		if len(a.Vals) != 1 {
			d.Fatalf(t, "argument %s wants one value", a.Key)
		}
		switch a.Key {
		case "term":
			c.LeaderTerm = transcriptUint(t, d, a.Vals[0])
		case "request":
			c.RequestID = a.Vals[0]
		case "at":
			c.ProposedAtUnixMs = int64(transcriptUint(t, d, a.Vals[0]))
		default:
			d.Fatalf(t, "unknown argument %s (term, request, at)", a.Key)
		}
	}
	next, results, err := s.ApplyCommands(s.AppliedIndex()+1, c)
	if err != nil {
		d.Fatalf(t, "Apply: %v", err)
	}
	if err := next.CheckInvariants(); err != nil {
		d.Fatalf(t, "invariants after %s: %v", typ, err)
	}
	if err := Successor(s, next); err != nil {
		d.Fatalf(t, "successor after %s: %v", typ, err)
	}
	r := results[0]
	if rej := r.GetRejection(); rej != nil {
		return next, fmt.Sprintf("refused %s: %s\n", rej.Code, rej.Message)
	}
	if r.Value == nil {
		return next, "ok\n"
	}
	return next, "ok " + transcriptMsg(r.ProtoReflect()) + "\n"
}

func transcriptUint(t *testing.T, d *datadriven.TestData, v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		d.Fatalf(t, "%q is not a number", v)
	}
	return n
}

// transcriptShow prints one part of the state.
func transcriptShow(t *testing.T, s *State, d *datadriven.TestData) string {
	if len(d.CmdArgs) == 0 {
		d.Fatalf(t, "show what?")
	}
	var lines []string
	add := func(m proto.Message) { lines = append(lines, transcriptMsg(m.ProtoReflect())) }
	switch what := d.CmdArgs[0].Key; what {
	case "pchannels":
		for _, p := range s.PChannels() {
			add(p)
		}
	case "nodes":
		for _, n := range s.StreamingNodes() {
			add(n)
		}
	case "broadcasts":
		for _, b := range s.BroadcastTasks() {
			add(b)
		}
	case "collections":
		for _, c := range s.Collections() {
			add(c)
		}
	case "segments":
		s.EachSegment(func(g *Segment) bool {
			lines = append(lines, fmt.Sprintf("segment %d: %s %s vchannel=%s rows=%d start=%s dml=%s seal_ts=%d",
				g.ID, g.State, g.Level, g.VChannel, g.NumRows, transcriptPos(g.Start), transcriptPos(g.DML), g.SealTs))
			return true
		})
	case "checkpoints":
		for _, cp := range s.ChannelCheckpoints() {
			lines = append(lines, fmt.Sprintf("%s: %s node=%d pchannel_term=%d", cp.VChannel, transcriptPos(cp.Position), cp.NodeID, cp.PChannelTerm))
		}
	case "manifest":
		if len(d.CmdArgs) != 2 {
			d.Fatalf(t, "show manifest <segment id>")
		}
		seg := int64(transcriptUint(t, d, d.CmdArgs[1].Key))
		p, ok, err := s.ManifestPointer(seg)
		switch {
		case err != nil:
			lines = append(lines, "unreadable: "+err.Error())
		case !ok:
			lines = append(lines, "none")
		default:
			lines = append(lines, fmt.Sprintf("%s (base %s, version %d)", p.Key(), p.Base, p.Version))
		}
	case "leader":
		id, at := s.EstablishedLeader()
		lines = append(lines, fmt.Sprintf("term %d: %s at %d", s.EstablishedTerm(), id, at))
	default:
		d.Fatalf(t, "show %s: unknown (pchannels, nodes, broadcasts, collections, segments, checkpoints, manifest N, leader)", what)
	}
	if len(lines) == 0 {
		return "none\n"
	}
	return strings.Join(lines, "\n") + "\n"
}

// transcriptMsg prints m on one line, its set fields in declaration order
// (prototext's own output varies its spacing from build to build, so a
// transcript could not be compared with it).
func transcriptMsg(m protoreflect.Message) string {
	var parts []string
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if !m.Has(fd) {
			continue
		}
		v := m.Get(fd)
		var s string
		switch {
		case fd.IsList():
			l := v.List()
			items := make([]string, l.Len())
			for j := range items {
				items[j] = transcriptValue(fd, l.Get(j))
			}
			s = "[" + strings.Join(items, " ") + "]"
		case fd.IsMap():
			var items []string
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				items = append(items, k.String()+":"+transcriptValue(fd.MapValue(), mv))
				return true
			})
			sort.Strings(items)
			s = "{" + strings.Join(items, " ") + "}"
		default:
			s = transcriptValue(fd, v)
		}
		parts = append(parts, string(fd.Name())+"="+s)
	}
	return strings.Join(parts, " ")
}

func transcriptValue(fd protoreflect.FieldDescriptor, v protoreflect.Value) string {
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "{" + transcriptMsg(v.Message()) + "}"
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return string(ev.Name())
		}
		return strconv.Itoa(int(v.Enum()))
	case protoreflect.StringKind:
		return strconv.Quote(v.String())
	case protoreflect.BytesKind:
		return fmt.Sprintf("%d bytes", len(v.Bytes()))
	}
	return v.String()
}

// transcriptPos prints a position as term/offset@timestamp.
func transcriptPos(p Position) string {
	return fmt.Sprintf("%d/%d@%d", p.Term, p.Offset, p.Timestamp)
}
