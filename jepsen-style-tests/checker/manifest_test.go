package checker

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/coordd/coordd/jepsen-style-tests/history"
)

func mop(i, client int, f string, t history.Type, in, out any, invoke, complete int64) history.Op {
	bi, _ := json.Marshal(in)
	var bo json.RawMessage
	if out != nil {
		bo, _ = json.Marshal(out)
	}
	return history.Op{Index: i, Client: client, F: f, Type: t, Input: bi, Output: bo, Invoke: invoke, Complete: complete}
}

func commitOp(i, client int, seg int64, key string, t history.Type, version int64, invoke, complete int64) history.Op {
	var out any
	if t == history.Ok {
		out = ManifestCommitOut{Version: version}
	}
	return mop(i, client, FManifestCommit, t, ManifestCommitIn{Segment: seg, Key: key}, out, invoke, complete)
}

func readOp(i, client int, f string, seg, version int64, keys []string, invoke, complete int64) history.Op {
	return mop(i, client, f, history.Ok, ManifestReadIn{Segment: seg}, ManifestReadOut{Version: version, Keys: keys}, invoke, complete)
}

// manifestBase: two clients commit to segment 1 concurrently, one commit
// with unknown outcome, a reader in between, segment 2 untouched by commits.
func manifestBase() []history.Op {
	return []history.Op{
		commitOp(0, 1, 1, "a", history.Ok, 2, 0, 10),
		commitOp(1, 2, 1, "b", history.Ok, 3, 5, 15), // concurrent with a: order decided by versions
		readOp(2, 3, FManifestRead, 1, 3, []string{"a", "b"}, 20, 25),
		commitOp(3, 1, 1, "c", history.Info, 0, 30, 40), // unknown: it did publish (v5 below)
		commitOp(4, 2, 1, "d", history.Ok, 6, 45, 50),
		readOp(5, 3, FManifestRead, 2, 1, nil, 45, 50),
		readOp(6, 3, FManifestFinal, 1, 6, []string{"a", "b", "c", "d"}, 60, 70),
		readOp(7, 3, FManifestFinal, 2, 1, nil, 60, 70),
	}
}

func TestManifestCheckersAcceptValidHistory(t *testing.T) {
	ops := manifestBase()
	if r := ManifestLinearizable(ops, 10*time.Second, "", nil); r.Verdict != Valid {
		t.Fatalf("linearizable: %v", r)
	}
	if r := ManifestAcknowledgedPresent(ops); r.Verdict != Valid {
		t.Fatalf("acknowledged: %v", r)
	}
	// The unknown commit may also never have happened.
	ops[6] = readOp(6, 3, FManifestFinal, 1, 6, []string{"a", "b", "d"}, 60, 70)
	if r := ManifestLinearizable(ops, 10*time.Second, "", nil); r.Verdict != Valid {
		t.Fatalf("linearizable without the unknown commit: %v", r)
	}
}

func TestManifestCheckersCatchViolations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func([]history.Op) []history.Op
		lin, ak bool // which checker must object
	}{
		{"lost update (b's revision built on v1, a missing)", func(o []history.Op) []history.Op {
			o[2] = readOp(2, 3, FManifestRead, 1, 3, []string{"b"}, 20, 25)
			return o
		}, true, false},
		{"version went back after a completed commit", func(o []history.Op) []history.Op {
			o[4] = commitOp(4, 2, 1, "d", history.Ok, 3, 45, 50)
			return o
		}, true, false},
		{"two commits published the same version", func(o []history.Op) []history.Op {
			o[1] = commitOp(1, 2, 1, "b", history.Ok, 2, 5, 15)
			return o
		}, true, false},
		{"a read saw an acknowledged commit before it was invoked", func(o []history.Op) []history.Op {
			o[6] = readOp(6, 3, FManifestFinal, 1, 7, []string{"a", "b", "c", "d", "e"}, 60, 70)
			return append(o, readOp(8, 4, FManifestRead, 1, 7, []string{"a", "b", "c", "d", "e"}, 51, 52),
				commitOp(9, 1, 1, "e", history.Ok, 7, 53, 54))
		}, true, false},
		{"same version, different content", func(o []history.Op) []history.Op {
			return append(o, readOp(8, 4, FManifestRead, 1, 3, []string{"a", "b", "x"}, 26, 27))
		}, true, false},
		{"acknowledged commit missing from the final revision", func(o []history.Op) []history.Op {
			o[6] = readOp(6, 3, FManifestFinal, 1, 6, []string{"a", "c", "d"}, 60, 70)
			return o
		}, true, true},
		{"a failed commit's key published", func(o []history.Op) []history.Op {
			o[3] = commitOp(3, 1, 1, "c", history.Fail, 0, 30, 40)
			return o
		}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := tc.edit(manifestBase())
			lin := ManifestLinearizable(ops, 10*time.Second, "", nil)
			ak := ManifestAcknowledgedPresent(ops)
			if (lin.Verdict == Invalid) != tc.lin {
				t.Errorf("linearizable: %v (want invalid: %v)", lin, tc.lin)
			}
			if (ak.Verdict == Invalid) != tc.ak {
				t.Errorf("acknowledged-present: %v (want invalid: %v)", ak, tc.ak)
			}
		})
	}
}

func TestManifestAcknowledgedPresentNeedsFinalRead(t *testing.T) {
	ops := manifestBase()[:6]
	if r := ManifestAcknowledgedPresent(ops); r.Verdict != Invalid {
		t.Fatalf("acknowledged commits without a final read: %v", r)
	}
	if r := ManifestAcknowledgedPresent(nil); r.Verdict != Unknown {
		t.Fatalf("empty history: %v", r)
	}
}
