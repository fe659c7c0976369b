package vocab

import "errors"

// Class is one of the error classes every service shares
// (docs/semantics.md#error-classes). A package's own errors are marked
// with a class (NewSentinel, or an Is method that matches the class's
// sentinel), so the API maps every error through one row per class and a
// new service adds no rows.
type Class int

// The classes, in the order ClassOf tries them: a refusal about the state
// (conflict, not found, exists, precondition) before capacity, before
// availability, before bad input; a wait that ran out, then a caller that
// gave up, last.
const (
	// ClassConflict: the request raced a newer state (a stale version or
	// term, an order it no longer holds); re-read and decide again.
	ClassConflict Class = iota + 1
	// ClassNotFound: what the request names does not exist.
	ClassNotFound
	// ClassExists: what the request creates exists already.
	ClassExists
	// ClassPrecondition: the state does not allow the request now.
	ClassPrecondition
	// ClassExhausted: a bound is reached (the proposal queue, the state
	// budget).
	ClassExhausted
	// ClassUnavailable: this member cannot serve the request now (not the
	// leader, shutting down). Nothing was done, unless the error also
	// says the outcome is unknown (leadership.ErrOutcomeUnknown).
	ClassUnavailable
	// ClassPermission: the caller may not do this.
	ClassPermission
	// ClassInvalid: the request is malformed whatever the state.
	ClassInvalid
	// ClassTimeout: a wait of the request's own ran out.
	ClassTimeout
	// ClassCanceled: the caller gave up.
	ClassCanceled
)

// Classes lists every class, in ClassOf's order.
func Classes() []Class {
	return []Class{ClassConflict, ClassNotFound, ClassExists, ClassPrecondition, ClassExhausted,
		ClassUnavailable, ClassPermission, ClassInvalid, ClassTimeout, ClassCanceled}
}

// The classes' sentinels: errors.Is(err, ErrNotFound) says err is of class
// ClassNotFound. ErrInvalid (errors.go) is ClassInvalid's.
var (
	ErrConflict     = errors.New("conflict")
	ErrNotFound     = errors.New("not found")
	ErrExists       = errors.New("already exists")
	ErrPrecondition = errors.New("failed precondition")
	ErrExhausted    = errors.New("exhausted")
	ErrUnavailable  = errors.New("unavailable")
	ErrPermission   = errors.New("permission denied")
	ErrTimeout      = errors.New("timed out")
	ErrCanceled     = errors.New("canceled")
)

// Sentinel is c's sentinel error.
func (c Class) Sentinel() error {
	switch c {
	case ClassConflict:
		return ErrConflict
	case ClassNotFound:
		return ErrNotFound
	case ClassExists:
		return ErrExists
	case ClassPrecondition:
		return ErrPrecondition
	case ClassExhausted:
		return ErrExhausted
	case ClassUnavailable:
		return ErrUnavailable
	case ClassPermission:
		return ErrPermission
	case ClassInvalid:
		return ErrInvalid
	case ClassTimeout:
		return ErrTimeout
	case ClassCanceled:
		return ErrCanceled
	}
	return nil
}

func (c Class) String() string {
	if s := c.Sentinel(); s != nil {
		return s.Error()
	}
	return "unclassified"
}

// ClassOf is the first class, in Classes' order, that err is of (0: none).
func ClassOf(err error) Class {
	if err == nil {
		return 0
	}
	for _, c := range Classes() {
		if errors.Is(err, c.Sentinel()) {
			return c
		}
	}
	return 0
}

// classed is a package's own sentinel of a class: it is itself (errors.Is
// by identity) and of its class.
type classed struct {
	text  string
	class error
}

func (e *classed) Error() string        { return e.text }
func (e *classed) Is(target error) bool { return target == e.class }
func (e *classed) Unwrap() []error      { return nil }

// NewSentinel returns a new sentinel error with text that is of class c:
// errors.Is matches it by identity, and c's sentinel.
func NewSentinel(c Class, text string) error { return &classed{text: text, class: c.Sentinel()} }
