package vocab

import (
	"errors"
	"fmt"
)

// ErrInvalid marks a value that breaks one of the rules of this package.
// Refusals match it with errors.Is; their text leaves the word out (the
// commands package wraps them into "invalid command: ..." for log entries).
var ErrInvalid = errors.New("invalid")

// ruleError is a refusal whose text is the broken rule alone.
type ruleError struct{ msg string }

func (e *ruleError) Error() string        { return e.msg }
func (e *ruleError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &ruleError{msg: fmt.Sprintf(format, args...)}
}
