// Package vocab owns coordd's shared vocabulary that is not the replicated
// log's schema: how channels are named and parsed, the limits a client must
// respect (targets per broadcast, VChannels per collection, IDs per
// allocation, key and reason lengths), the syntax of broadcast message
// types, resource-key domains, idempotency-key scoping, member IDs and
// addresses, request IDs, and the shape of a broadcast, an ack and an
// abandon, all over plain Go values.
//
// It exists so that the Go SDK (client) and the streaming node can apply
// exactly the rules the server applies without importing the log schema
// (commands and commands/logpb): the SDK must not change when the log
// format does. The commands package validates log entries by calling
// these rules, so there is one rule set, not a copy per layer.
//
// Every refusal is an error for which errors.Is(err, ErrInvalid) holds;
// its text is the rule alone, fit to show a caller. The error classes
// every service shares (Class) live here too, with Errorf, which makes an
// error of a kind whose text is what a caller is told: the API answers
// with that text and the class's code, and edits no message
// (docs/semantics.md#error-classes). The package imports only the
// standard library.
package vocab
