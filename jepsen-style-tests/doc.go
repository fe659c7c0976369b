// Package jepsen holds coordd's Jepsen-style test matrix: real coordd
// processes on loopback, a nemesis that partitions, kills, pauses and
// reconfigures them, clients that record every operation, and checkers
// that judge the histories. See README.md.
package jepsen
