package vocab

import (
	"errors"
	"fmt"
	"io"
	"testing"
)

// TestErrorf: an Error's text is its message alone, never its kind's
// words; errors.Is matches the kind, the kind's class and what the format
// wrapped with %w, through any wrapping.
func TestErrorf(t *testing.T) {
	gone := NewSentinel(ClassNotFound, "streaming node is gone")
	err := fmt.Errorf("assign: %w", Errorf(gone, "node %d", 3))
	if err.Error() != "assign: node 3" {
		t.Fatalf("text %q: the kind's text must not be part of it", err)
	}
	if !errors.Is(err, gone) || !errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalid) {
		t.Fatalf("errors.Is: kind %v, class %v, other class %v", errors.Is(err, gone), errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid))
	}
	if c := ClassOf(err); c != ClassNotFound {
		t.Fatalf("ClassOf = %v", c)
	}
	var e *Error
	if !errors.As(err, &e) || e.Kind() != gone {
		t.Fatalf("errors.As: %v, kind %v", e, e.Kind())
	}

	// %w arguments stay reachable, one or several.
	one := Errorf(ErrInvalid, "read: %w", io.ErrUnexpectedEOF)
	if one.Error() != "read: unexpected EOF" || !errors.Is(one, io.ErrUnexpectedEOF) || !errors.Is(one, ErrInvalid) {
		t.Fatalf("one %%w: %q", one)
	}
	two := Errorf(ErrPrecondition, "%w and %w", io.EOF, gone)
	if two.Error() != "EOF and streaming node is gone" || !errors.Is(two, io.EOF) || !errors.Is(two, gone) {
		t.Fatalf("two %%w: %q", two)
	}
	// A wrapped refusal keeps its own text: Errorf(kind, "%w", rule) is
	// the rule's words, now also of kind.
	rule := ValidateMemberID("a b")
	if w := Errorf(ErrPrecondition, "%w", rule); w.Error() != rule.Error() || !errors.Is(w, ErrInvalid) || !errors.Is(w, ErrPrecondition) {
		t.Fatalf("wrapped rule: %q", w)
	}
	// The vocabulary's own refusals are of this form.
	if !errors.As(rule, &e) || e.Kind() != ErrInvalid {
		t.Fatalf("ValidateMemberID's refusal %T is not an Error of kind ErrInvalid", rule)
	}
}

func TestErrorfNilKindPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Errorf(nil, ...) did not panic")
		}
	}()
	_ = Errorf(nil, "x")
}
