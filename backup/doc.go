// Package backup is the file format of coordd backups and the tools that
// read them: a fixed-size text header (format version, cluster ID, raft index
// and term, size), the state machine snapshot, and a SHA-256 over both.
// `coordctl snapshot save` writes such files from the leader's SaveSnapshot
// stream, `coordctl snapshot inspect` verifies and summarizes them, and
// `coordd restore` seeds a new cluster from one. Summaries count and digest
// the snapshot table by table, which is also how tests compare two states.
package backup
