package vocab

// The two refusals of a request's shape that every layer shares: the log's
// package (commands.ErrInvalid, commands.ErrTooLarge are these) makes them,
// the request services wrap them, and the API strips their text from the
// message a caller sees (the code, InvalidArgument, says as much). They
// live on this floor so the API names them without importing the log.
var (
	// ErrInvalidCommand marks a request or command whose shape is wrong
	// regardless of state.
	ErrInvalidCommand = NewSentinel(ClassInvalid, "invalid command")
	// ErrCommandTooLarge marks an entry or command over its size limit.
	ErrCommandTooLarge = NewSentinel(ClassInvalid, "command too large")
)
