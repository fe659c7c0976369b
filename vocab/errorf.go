package vocab

import (
	"errors"
	"fmt"
)

// Error is an error of a kind (a sentinel: a class's own, or a package's
// made by NewSentinel) whose text is its public message: what a caller is
// told, and nothing else. The kind is structure, not text: errors.Is
// matches the kind and, through it, the kind's class, and the API maps
// that class to its code (docs/semantics.md#error-classes). So the text a
// client sees is the text the error was made with, never what remains
// after cutting a sentinel's words out of it.
//
// Build one with Errorf.
type Error struct {
	kind    error
	msg     string
	wrapped []error
}

// Errorf returns an error of kind whose text is the formatted message
// alone; the kind's own text is not part of it (the code an API answers
// with says as much). The %w verbs of format wrap their arguments as
// fmt.Errorf's do, so errors.Is and errors.As see them too.
//
// kind must not be nil: an error of no kind is fmt.Errorf's.
func Errorf(kind error, format string, args ...any) error {
	if kind == nil {
		panic("vocab.Errorf: nil kind")
	}
	e := &Error{kind: kind}
	w := fmt.Errorf(format, args...)
	e.msg = w.Error()
	switch u := w.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			e.wrapped = []error{inner}
		}
	case interface{ Unwrap() []error }:
		e.wrapped = u.Unwrap()
	}
	return e
}

// Error is the public message.
func (e *Error) Error() string { return e.msg }

// Is holds for the kind and for whatever the kind is (its class's
// sentinel).
func (e *Error) Is(target error) bool { return errors.Is(e.kind, target) }

// Unwrap returns the errors format wrapped with %w.
func (e *Error) Unwrap() []error { return e.wrapped }

// Kind is the sentinel e is of.
func (e *Error) Kind() error { return e.kind }
