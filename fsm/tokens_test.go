package fsm

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/coordd/coordd/commands"
	"github.com/coordd/coordd/commands/logpb"
)

func tokenRec(id string, role logpb.TokenRole, bootstrap bool) *logpb.TokenRecord {
	h := bytes.Repeat([]byte{byte(len(id))}, 32)
	rec := &logpb.TokenRecord{Id: id, Name: "t-" + id, Role: role, SecretSha256: h, Bootstrap: bootstrap}
	if role == logpb.TokenRole_TOKEN_ROLE_NODE {
		rec.NodeId = uint64(len(id)) // node tokens are bound from CreateToken v2 on
	}
	return rec
}

func createToken(id string, role logpb.TokenRole, bootstrap bool) *logpb.CreateToken {
	return &logpb.CreateToken{Token: tokenRec(id, role, bootstrap)}
}

// roundTrip checks that s survives a snapshot byte for byte.
func roundTrip(t rapid.TB, s *State) *State {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteSnapshot(&buf); err != nil {
		t.Fatalf("WriteSnapshot: %v", err)
	}
	r, err := ReadSnapshot(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	var again bytes.Buffer
	if err := r.WriteSnapshot(&again); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Fatal("snapshot round trip changed the bytes")
	}
	return r
}

func TestApplyCreateAndRevokeToken(t *testing.T) {
	const a, b = "00000000000000aa", "00000000000000bb"
	s := build(t, leaderEstablished(1, "n1"))
	empty := snapshotBytes(t, s)

	s, res := mustApply(t, s, cmd(createToken(a, logpb.TokenRole_TOKEN_ROLE_ADMIN, true), withProposedAt(1234)))
	checkResult(t, res[0], okResult(), "")
	got, ok := s.Token(a)
	if !ok || got.Role != logpb.TokenRole_TOKEN_ROLE_ADMIN || got.CreatedMs != 1234 || !got.Bootstrap || !s.BootstrapTokenInstalled() {
		t.Fatalf("after create: %v %v, bootstrapped %v", got, ok, s.BootstrapTokenInstalled())
	}

	// Refusals change nothing.
	for _, tc := range []struct {
		name string
		body *logpb.CreateToken
		code logpb.RejectCode
		msg  string
	}{
		{"duplicate id", createToken(a, logpb.TokenRole_TOKEN_ROLE_READ, false), logpb.RejectCode_REJECT_CONFLICT, "already exists"},
		{"second bootstrap", createToken(b, logpb.TokenRole_TOKEN_ROLE_ADMIN, true), logpb.RejectCode_REJECT_CONFLICT, "bootstrap token was already installed"},
		{"invalid", &logpb.CreateToken{Token: &logpb.TokenRecord{Id: "x"}}, logpb.RejectCode_REJECT_INVALID, ""},
		{"unbound node token", &logpb.CreateToken{Token: &logpb.TokenRecord{Id: b, Role: logpb.TokenRole_TOKEN_ROLE_NODE,
			SecretSha256: bytes.Repeat([]byte{1}, 32)}}, logpb.RejectCode_REJECT_INVALID, "bound to a node identity"},
	} {
		next, res := mustApply(t, s, cmd(tc.body))
		checkResult(t, res[0], rejected(tc.code), tc.msg)
		sameExceptApplied(t, s, next)
	}

	s, res = mustApply(t, s, cmd(createToken(b, logpb.TokenRole_TOKEN_ROLE_NODE, false)))
	checkResult(t, res[0], okResult(), "")
	if ts := s.Tokens(); len(ts) != 2 || ts[0].Id != a || ts[1].Id != b {
		t.Fatalf("Tokens() = %v", ts)
	}
	s = roundTrip(t, s)

	s, res = mustApply(t, s, cmd(&logpb.RevokeToken{Id: a}))
	checkResult(t, res[0], okResult(), "")
	if _, ok := s.Token(a); ok {
		t.Fatal("revoked token still present")
	}
	next, res := mustApply(t, s, cmd(&logpb.RevokeToken{Id: a}))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_NOT_FOUND), "does not exist")
	sameExceptApplied(t, s, next)

	// A revoked bootstrap token cannot come back through a member that
	// still holds the old --bootstrap-token-file.
	next, res = mustApply(t, s, cmd(createToken(a, logpb.TokenRole_TOKEN_ROLE_ADMIN, true)))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_CONFLICT), "bootstrap")
	sameExceptApplied(t, s, next)
	if !roundTrip(t, s).BootstrapTokenInstalled() {
		t.Fatal("the bootstrap mark did not survive a snapshot")
	}

	// A v1 entry (written before per-node identity) may hold an unbound
	// node token: replaying it must still install it, as it did then.
	legacy := cmd(&logpb.CreateToken{Token: &logpb.TokenRecord{Id: "00000000000000ff", Role: logpb.TokenRole_TOKEN_ROLE_NODE,
		SecretSha256: bytes.Repeat([]byte{1}, 32)}})
	legacy.Version = 1
	s, res = mustApply(t, s, legacy)
	checkResult(t, res[0], okResult(), "")
	if rec, ok := roundTrip(t, s).Token("00000000000000ff"); !ok || rec.NodeId != 0 || rec.Role != logpb.TokenRole_TOKEN_ROLE_NODE {
		t.Fatalf("legacy node token after a snapshot: %v %v", rec, ok)
	}

	// A stale leader's token creation is refused like any other command.
	s = build(t, leaderEstablished(5, "n1"))
	next, res = mustApply(t, s, cmd(createToken(b, logpb.TokenRole_TOKEN_ROLE_ADMIN, false), withTerm(4)))
	checkResult(t, res[0], rejected(logpb.RejectCode_REJECT_STALE), "")
	sameExceptApplied(t, s, next)

	// A state that never used tokens snapshots exactly as before tokens existed.
	if !bytes.Equal(empty, snapshotBytes(t, build(t, leaderEstablished(1, "n1")))) {
		t.Fatal("token-free snapshot bytes changed")
	}
}

// TestTokenTableProperty: any sequence of creates and revokes leaves the
// table equal to a simple model, and the state survives a snapshot.
func TestTokenTableProperty(t *testing.T) {
	apply := func(rt *rapid.T, s *State, c commands.Command) (*State, []*logpb.Result) {
		next, res, err := s.ApplyCommands(s.AppliedIndex()+1, c)
		if err != nil {
			rt.Fatalf("Apply: %v", err)
		}
		if err := next.CheckInvariants(); err != nil {
			rt.Fatalf("invariants: %v", err)
		}
		return next, res
	}
	rapid.Check(t, func(rt *rapid.T) {
		s := New()
		model := map[string]logpb.TokenRole{}
		bootstrapped := false
		steps := rapid.IntRange(1, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			id := fmt.Sprintf("%016x", rapid.IntRange(0, 7).Draw(rt, "id"))
			var res []*logpb.Result
			if rapid.Bool().Draw(rt, "create") {
				role := logpb.TokenRole(rapid.IntRange(1, 4).Draw(rt, "role"))
				boot := rapid.Bool().Draw(rt, "bootstrap")
				s, res = apply(rt, s, cmd(createToken(id, role, boot)))
				_, dup := model[id]
				wantOK := !dup && !(boot && bootstrapped)
				if (res[0].Rejection == nil) != wantOK {
					rt.Fatalf("create %s boot=%v: %v, want ok=%v", id, boot, res[0], wantOK)
				}
				if wantOK {
					model[id] = role
					bootstrapped = bootstrapped || boot
				}
			} else {
				s, res = apply(rt, s, cmd(&logpb.RevokeToken{Id: id}))
				_, had := model[id]
				if (res[0].Rejection == nil) != had {
					rt.Fatalf("revoke %s: %v, had %v", id, res[0], had)
				}
				delete(model, id)
			}
		}
		if len(s.Tokens()) != len(model) || s.BootstrapTokenInstalled() != bootstrapped {
			rt.Fatalf("table %v, model %v", s.Tokens(), model)
		}
		for id, role := range model {
			if got, ok := s.Token(id); !ok || got.Role != role {
				rt.Fatalf("token %s: %v %v, want role %v", id, got, ok, role)
			}
		}
		roundTrip(rt, s)
	})
}
