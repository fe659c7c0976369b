package vocab

import "errors"

// ErrInvalid marks a value that breaks one of the rules of this package.
// Refusals match it with errors.Is; their text is the broken rule alone
// (an Error of this kind), fit to show a caller.
var ErrInvalid = errors.New("invalid")

func invalid(format string, args ...any) error { return Errorf(ErrInvalid, format, args...) }
