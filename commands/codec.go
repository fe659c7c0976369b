package commands

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/coordd/coordd/commands/logpb"
	"github.com/coordd/coordd/vocab"
)

// Limits enforced at the proposal boundary and again on decode.
const (
	// MaxEntryBytes bounds one encoded raft log entry.
	MaxEntryBytes = 4 << 20
	// MaxCommandBytes bounds one command body.
	MaxCommandBytes = 1 << 20
	// MaxCommandsPerEntry bounds how many commands one entry batches.
	MaxCommandsPerEntry = 512
)

var (
	// ErrTooLarge: an entry or command is over its size limit
	// (vocab.ErrCommandTooLarge, so the API names it without the log).
	ErrTooLarge = vocab.ErrCommandTooLarge
	// ErrMalformed: bytes that are not a valid entry.
	ErrMalformed = errors.New("malformed log entry")
	// ErrUnknownType: a type this binary does not know and may not skip.
	ErrUnknownType = errors.New("unknown command type")
	// ErrNewerVersion: a body version newer than this binary understands.
	ErrNewerVersion = errors.New("command version newer than supported")
)

// Command is one state change with the metadata the leader stamped.
type Command struct {
	Type             Type
	Version          uint32
	RequestID        string
	ProposedAtUnixMs int64
	// LeaderTerm is the raft term in which the decision to propose this
	// command was made. A leader routine sets it to its own term (see
	// DecidedIn); the proposer stamps the current term when it is zero.
	// Apply refuses a command whose term is older than the newest
	// established leader's.
	LeaderTerm uint64
	// CallerNode is the node identity of the node credential the command
	// was proposed for (Envelope.caller_node): the proposer stamps it from
	// the proposal's CallerNode option, never from a request.
	CallerNode uint64
	// Body is nil only for an ignorable type this binary does not know.
	Body proto.Message

	// checked is set by New: the shape, size and request ID were validated.
	checked bool
	// fingerprint caches Fingerprint for a decoded command with a request ID.
	fingerprint []byte
}

// New builds a command to propose. It is the one entry point for every
// proposer (API handlers, leader routines, the client SDK's local checks;
// a broadcast's CreateBroadcast alone is completed by
// BroadcastRequest.Command, which runs the same checks split between the
// serving member and the leader):
// it resolves the body's type, checks the request ID and the body's shape
// (Validate) and size, and stamps the current version. requestID may be
// empty; with one, a retry returns the first result. Errors wrap ErrInvalid,
// ErrTooLarge or ErrUnknownType; nothing is proposed. Apply runs Validate
// again as the real guard.
func New(body proto.Message, requestID string) (Command, error) {
	c, err := wrap(body)
	if err != nil {
		return Command{}, err
	}
	if err := vocab.ValidateRequestID(requestID); err != nil {
		return Command{}, invalidWrap(err)
	}
	c.RequestID = requestID
	if err := Validate(c); err != nil {
		return Command{}, err
	}
	if n := proto.Size(body); n > MaxCommandBytes {
		return Command{}, fmt.Errorf("%w: %s body is %d bytes (max %d)", ErrTooLarge, c.Type, n, MaxCommandBytes)
	}
	c.checked = true
	return c, nil
}

// Checked reports whether c was built by New (and so validated). A proposer
// refuses a command that was not.
func (c Command) Checked() bool { return c.checked }

// DecidedIn returns c marked as decided in the given raft term: a leader
// routine passes the term it was started in, so Apply refuses the command
// once a newer leader has established itself.
func (c Command) DecidedIn(term uint64) Command {
	c.LeaderTerm = term
	return c
}

// wrap puts a body in a Command of its type at the current version without
// validating it.
func wrap(body proto.Message) (Command, error) {
	t, ok := TypeOf(body)
	if !ok {
		return Command{}, fmt.Errorf("%w: body %T is not a registered command", ErrUnknownType, body)
	}
	return Command{Type: t, Version: registry[t].version, Body: body}, nil
}

// MustNew wraps a body known at compile time WITHOUT validating it, for
// tests and tools that build states or entries directly (including invalid
// ones, to test the guards). It panics on an unregistered body. Proposers
// use New.
func MustNew(body proto.Message) Command {
	c, err := wrap(body)
	if err != nil {
		panic(err)
	}
	return c
}

var marshal = proto.MarshalOptions{Deterministic: true}

// EncodeEntry encodes commands as one log entry.
func EncodeEntry(cmds []Command) ([]byte, error) {
	if len(cmds) == 0 || len(cmds) > MaxCommandsPerEntry {
		return nil, fmt.Errorf("%w: %d commands in one entry (1..%d)", ErrTooLarge, len(cmds), MaxCommandsPerEntry)
	}
	entry := &logpb.Entry{Commands: make([]*logpb.Envelope, 0, len(cmds))}
	for _, c := range cmds {
		if err := vocab.ValidateRequestID(c.RequestID); err != nil {
			return nil, fmt.Errorf("encode %s: %w", c.Type, invalidWrap(err))
		}
		body, err := marshal.Marshal(c.Body)
		if err != nil {
			return nil, fmt.Errorf("encode %s body: %w", c.Type, err)
		}
		if len(body) > MaxCommandBytes {
			return nil, fmt.Errorf("%w: %s body is %d bytes (max %d)", ErrTooLarge, c.Type, len(body), MaxCommandBytes)
		}
		entry.Commands = append(entry.Commands, &logpb.Envelope{
			Type:             uint32(c.Type),
			Version:          c.Version,
			RequestId:        c.RequestID,
			ProposedAtUnixMs: c.ProposedAtUnixMs,
			LeaderTerm:       c.LeaderTerm,
			Body:             body,
			CallerNode:       c.CallerNode,
		})
	}
	data, err := marshal.Marshal(entry)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	if len(data) > MaxEntryBytes {
		return nil, fmt.Errorf("%w: entry is %d bytes (max %d)", ErrTooLarge, len(data), MaxEntryBytes)
	}
	return data, nil
}

// DecodeEntry decodes one log entry. Any error means the entry must not be
// applied; for a committed entry that is a fatal condition for the replica.
func DecodeEntry(data []byte) ([]Command, error) {
	if len(data) > MaxEntryBytes {
		return nil, fmt.Errorf("%w: entry is %d bytes (max %d)", ErrTooLarge, len(data), MaxEntryBytes)
	}
	var entry logpb.Entry
	if err := proto.Unmarshal(data, &entry); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(entry.Commands) == 0 || len(entry.Commands) > MaxCommandsPerEntry {
		return nil, fmt.Errorf("%w: %d commands in one entry (1..%d)", ErrMalformed, len(entry.Commands), MaxCommandsPerEntry)
	}
	cmds := make([]Command, 0, len(entry.Commands))
	for i, env := range entry.Commands {
		c, err := decodeEnvelope(env)
		if err != nil {
			return nil, fmt.Errorf("command %d: %w", i, err)
		}
		cmds = append(cmds, c)
	}
	return cmds, nil
}

func decodeEnvelope(env *logpb.Envelope) (Command, error) {
	t := Type(env.Type)
	c := Command{
		Type:             t,
		Version:          env.Version,
		RequestID:        env.RequestId,
		ProposedAtUnixMs: env.ProposedAtUnixMs,
		LeaderTerm:       env.LeaderTerm,
		CallerNode:       env.CallerNode,
	}
	if err := vocab.ValidateRequestID(env.RequestId); err != nil {
		return Command{}, fmt.Errorf("%w: %w", ErrMalformed, invalidWrap(err))
	}
	if len(env.Body) > MaxCommandBytes {
		return Command{}, fmt.Errorf("%w: %s body is %d bytes (max %d)", ErrTooLarge, t, len(env.Body), MaxCommandBytes)
	}
	if c.RequestID != "" {
		// From the log bytes, so that every replica, whether or not it
		// knows the type, records the same fingerprint.
		c.fingerprint = fingerprintOf(t, env.Body)
	}
	s, known := registry[t]
	switch {
	case !known && t.IsIgnorable():
		return c, nil
	case !known:
		return Command{}, fmt.Errorf("%w: %s", ErrUnknownType, t)
	case env.Version == 0:
		return Command{}, fmt.Errorf("%w: %s has version 0", ErrMalformed, t)
	case env.Version > s.version:
		if t.IsIgnorable() {
			c.Body = nil
			return c, nil
		}
		return Command{}, fmt.Errorf("%w: %s version %d (this binary reads up to %d)", ErrNewerVersion, t, env.Version, s.version)
	}
	body := s.newBody()
	if err := proto.Unmarshal(env.Body, body); err != nil {
		return Command{}, fmt.Errorf("%w: %s body: %v", ErrMalformed, t, err)
	}
	c.Body = body
	if c.fingerprint != nil {
		if id, ok := identityOf(t, body); ok {
			c.fingerprint = fingerprintOf(t, id)
		}
	}
	return c, nil
}
