// Package manifest is the leader's half of segment manifest commits
// (docs/semantics.md#manifests): the revision object format, the
// per-segment lock table, the committer that writes the next revision and
// proposes its publication, the batch committer, and the orphan collector
// that deletes revisions no pointer will ever reference (it commits their
// retirement first, so none can be published afterwards).
//
// The committer is leader memory only. Every guard that protects the
// published state (base stability, expected manifest, segment health, the
// decision term) runs again inside Apply (fsm/manifest_apply.go); the
// checks here fail fast and keep two commits of one segment from racing.
package manifest
