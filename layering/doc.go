// Package layering holds the test that keeps coordd's imports pointing
// downward: the log schema and the FSM import nothing above them, the
// raft node knows no controller, controllers know no API server, the API
// knows no command, and no product package imports a test harness. The
// allowed edges are the table in layering_test.go; see
// docs/architecture.md for what each layer does.
package layering
