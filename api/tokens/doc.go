// Package tokens is the Tokens service (docs/security.md#token-lifecycle): the
// checked CreateToken and RevokeToken requests, their commits, the token
// table as the API shows it, and the leader routine that installs the
// bootstrap admin token. The handlers in api/grpcserver only adapt to it.
//
// It follows the request services' convention (controller/channels,
// controller/datapath; docs/architecture.md#command-flow): a request is
// parsed once, on the member that serves the call, into a type only this
// package makes, holding the command commands.New built; the service
// proposes that command as built, and Apply runs every guard again. It
// sits in the api layer rather than under controller/ because a token's
// format and roles are api/auth's, which controllers may not import.
package tokens
