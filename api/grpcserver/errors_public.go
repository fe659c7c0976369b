package grpcserver

import (
	"strings"

	"github.com/coordd/coordd/vocab"
)

// publicMessage is the message a caller gets for err, read off the error
// tree rather than searched for in its text:
//
//   - An error made with vocab.Errorf says its public message: its kind is
//     structure, whose words the code already says.
//   - An error that wraps a kind (legacyKinds) first with %w,
//     fmt.Errorf("%w: detail", kind), says the kind's words first: they
//     go, the detail stays. The commands package builds its refusals so
//     (their words are part of what Apply records, below), and a few call
//     sites still do (TestLegacyErrorSites lists the files and fails on
//     any other).
//   - An error that wraps another ends with that one's text, which is
//     replaced by that one's public message.
//   - A refusal of Apply (commands.RejectedError, through its RecordedMessage) is recorded text: see
//     recordedMessage.
//
// Anything else is its own text, unedited.
func publicMessage(err error) string {
	text := err.Error()
	var wrapped []error
	switch u := err.(type) {
	case interface{ RecordedMessage() string }:
		return recordedMessage(u.RecordedMessage())
	case interface{ Unwrap() error }:
		if w := u.Unwrap(); w != nil {
			wrapped = []error{w}
		}
	case interface{ Unwrap() []error }:
		wrapped = u.Unwrap()
	}
	if len(wrapped) == 0 {
		return text
	}
	if isLegacyKind(wrapped[0]) {
		rest, ok := strings.CutPrefix(text, wrapped[0].Error()+": ")
		if !ok {
			return text // not the legacy shape: the kind is not its start
		}
		text, wrapped = rest, wrapped[1:]
		if len(wrapped) == 0 {
			return text
		}
	}
	last := wrapped[len(wrapped)-1]
	if head, ok := strings.CutSuffix(text, last.Error()); ok {
		return head + publicMessage(last)
	}
	return text
}

// legacyKinds are the sentinels whose words an error that wraps them first
// (fmt.Errorf("%w: detail", kind)) starts with and a caller should not
// see: the code says them already.
var legacyKinds = []error{vocab.ErrInvalidCommand, vocab.ErrCommandTooLarge, vocab.ErrNotFound}

func isLegacyKind(err error) bool {
	for _, k := range legacyKinds {
		if err == k { // identity: the kind itself, wrapped directly
			return true
		}
	}
	return false
}

// recordedKinds are the words of the kinds a refusal's recorded text may
// name as one of its ": "-separated parts ("segment 5: invalid command:
// stats key ..."): Apply formats the errors of the commands package into
// its refusals with %v.
var recordedKinds = map[string]bool{
	vocab.ErrInvalidCommand.Error():  true,
	vocab.ErrCommandTooLarge.Error(): true,
	vocab.ErrNotFound.Error():        true,
	vocab.ErrPrecondition.Error():    true,
}

// recordedMessage is the public message of a refusal Apply recorded: its
// text without the parts that are a kind's words alone (the code says
// them). A refusal cannot carry its kinds as structure: it is a
// logpb.Rejection's text, kept in the dedup table and in snapshots, so it
// must stay byte-identical across versions (fsm's golden log checks it).
// Parts are cut whole, never inside other words ("task not found: x"
// keeps its subject), and the last part, the detail, always stays.
func recordedMessage(msg string) string {
	parts := strings.Split(msg, ": ")
	kept := parts[:0]
	for i, p := range parts {
		if recordedKinds[p] && i < len(parts)-1 {
			continue
		}
		kept = append(kept, p)
	}
	return strings.Join(kept, ": ")
}
