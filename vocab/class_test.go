package vocab

import (
	"errors"
	"fmt"
	"testing"
)

// TestClassOf: a package's sentinel is itself and of its class, through
// any wrapping, and ClassOf tries the classes in order.
func TestClassOf(t *testing.T) {
	gone := NewSentinel(ClassNotFound, "streaming node is gone")
	err := fmt.Errorf("assign: %w: node 3", gone)
	if !errors.Is(err, gone) || !errors.Is(err, ErrNotFound) || errors.Is(err, ErrPrecondition) {
		t.Fatalf("errors.Is on %q: itself %v, not found %v, precondition %v",
			err, errors.Is(err, gone), errors.Is(err, ErrNotFound), errors.Is(err, ErrPrecondition))
	}
	if err.Error() != "assign: streaming node is gone: node 3" {
		t.Fatalf("text %q: a sentinel's text is its own", err)
	}
	if c := ClassOf(err); c != ClassNotFound {
		t.Fatalf("ClassOf = %v", c)
	}
	if c := ClassOf(errors.Join(ValidateMemberID("a b"), NewSentinel(ClassUnavailable, "x"))); c != ClassUnavailable {
		t.Fatalf("ClassOf(unavailable and invalid) = %v, want unavailable first", c)
	}
	if c := ClassOf(errors.New("disk on fire")); c != 0 || c.String() != "unclassified" {
		t.Fatalf("ClassOf(plain) = %v", c)
	}
	seen := map[error]bool{}
	for _, c := range Classes() {
		s := c.Sentinel()
		if s == nil || seen[s] || ClassOf(s) != c {
			t.Errorf("class %d: sentinel %v (repeated %v), ClassOf %v", c, s, seen[s], ClassOf(s))
		}
		seen[s] = true
	}
}
