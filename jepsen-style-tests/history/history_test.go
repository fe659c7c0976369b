package history

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestRecorder(t *testing.T) {
	r := NewRecorder(time.Now())
	a := r.Invoke(0, "f", map[string]int{"x": 1})
	b := r.Invoke(1, "f", nil)
	c := r.Invoke(2, "g", nil)
	a.Ok(map[string]int{"y": 2})
	a.Fail(errors.New("ignored: already completed"))
	b.Fail(errors.New("rejected"))
	ops := r.Close()
	c.Ok(1) // after Close: ignored
	if len(ops) != 3 {
		t.Fatalf("%d ops", len(ops))
	}
	if ops[0].Type != Ok || string(ops[0].Output) != `{"y":2}` || ops[1].Type != Fail || ops[1].Error != "rejected" {
		t.Fatalf("ops %+v", ops)
	}
	if ops[2].Type != Info || ops[2].Complete < ops[2].Invoke {
		t.Fatalf("pending op not closed as info: %+v", ops[2])
	}
	cnt := Count(ops)
	if cnt.Total != 3 || cnt.Ok != 1 || cnt.Fail != 1 || cnt.Info != 1 || cnt.ByF["f"] != 2 {
		t.Fatalf("counts %+v", cnt)
	}
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if err := WriteJSONL(path, ops); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(path)
	if err != nil || !reflect.DeepEqual(back, ops) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, ops)
	}
}
