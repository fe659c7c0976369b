package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coordd/coordd/backup"
	"github.com/coordd/coordd/raftnode"
	"github.com/coordd/coordd/raftnode/datadir"
	"github.com/coordd/coordd/vocab"
)

// Offline commands work on a stopped member's data dir and bind no port:
// restore (seed a new cluster from a backup), inspect (what a data dir
// holds) and recover (rewrite the configuration after quorum loss). Each
// checks all its input before it changes anything.

// parseOffline parses a subcommand's flags; positional arguments are refused.
func parseOffline(fs *flag.FlagSet, args []string, required ...string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return badConfig("%s: unexpected argument %q (every input is a flag)", fs.Name(), fs.Arg(0))
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			return badConfig("%s: --%s is required", fs.Name(), name)
		}
	}
	return nil
}

// restoreTSOMargin is how far above the restoring machine's clock the
// restored cluster's first timestamp lies by default: more than the TSO
// window's lead over its leader's clock (3 s) plus any sane clock skew
// between the old cluster's leader and this machine.
const restoreTSOMargin = time.Minute

// restoreTSOConfirm is how far above the restoring machine's clock a
// --ts-floor-ms may lie without --yes: a floor further ahead is more likely
// a typo (a year, a unit) than an old cluster's clock.
const restoreTSOConfirm = 24 * time.Hour

// utcMs formats Unix ms as an RFC 3339 UTC time.
func utcMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }

// restoreCmd: coordd restore --snapshot FILE --data-dir DIR --id ID --raft-addr ADDR --id-floor N [--ts-floor-ms MS [--yes]].
func restoreCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coordd restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	file := fs.String("snapshot", "", "backup file written by 'coordctl snapshot save'")
	dir := fs.String("data-dir", "", "the new member's data dir (missing or empty)")
	id := fs.String("id", "", "the new member's ID")
	raftAddr := fs.String("raft-addr", "", "the new member's raft address host:port")
	idFloor := fs.String("id-floor", "", "required: the restored cluster's first ID; above every ID the old cluster may have handed out "+
		"(the highest 'Allocator next ID' of its members' 'coordd inspect', see docs/operations.md#backup-and-restore)")
	tsFloor := fs.Int64("ts-floor-ms", 0, "the restored cluster's first timestamp, Unix ms (default and minimum: this machine's clock + 1 min, "+
		"and never below the backup's TSO limit); more than a day ahead of the clock needs --yes")
	yes := fs.Bool("yes", false, "confirm a --ts-floor-ms more than a day ahead of this machine's clock")
	asJSON := fs.Bool("json", false, "print the result as JSON")
	logStore := fs.String("raft-log-store", datadir.DefaultLogStore, "the log store the member will run on: wal or bolt (serve records it; serve's default keeps it)")
	if err := parseOffline(fs, args, "snapshot", "data-dir", "id", "raft-addr", "id-floor"); err != nil {
		return err
	}
	floor, err := strconv.ParseUint(*idFloor, 10, 64)
	if err != nil || floor == 0 {
		return badConfig("--id-floor: want a positive integer, got %q", *idFloor)
	}
	if floor > datadir.MaxRestoreIDFloor {
		return badConfig("--id-floor %d leaves too few IDs below 2^63 (segment and other IDs are int64): at most %d (2^62)", floor, datadir.MaxRestoreIDFloor)
	}
	if *tsFloor < 0 || *tsFloor >= 1<<46 {
		return badConfig("--ts-floor-ms: %d is not a Unix time in ms", *tsFloor)
	}
	if *tsFloor > datadir.MaxRestoreTSOFloorMs {
		return badConfig("--ts-floor-ms %d (%s) leaves less than a year below the timestamp limit (46-bit physical part, %s): at most %d",
			*tsFloor, utcMs(*tsFloor), utcMs(1<<46), datadir.MaxRestoreTSOFloorMs)
	}
	now := time.Now()
	if ahead := now.Add(restoreTSOConfirm).UnixMilli(); *tsFloor > ahead && !*yes {
		return badConfig("--ts-floor-ms %d (%s) is more than a day ahead of this machine's clock (%s): the restored cluster's timestamps "+
			"would run that far ahead of real time; add --yes if that is meant", *tsFloor, utcMs(*tsFloor), now.UTC().Format(time.RFC3339))
	}
	if !datadir.ValidLogStore(*logStore) {
		return badConfig("--raft-log-store must be %s or %s, got %q", datadir.LogStoreBolt, datadir.LogStoreWAL, *logStore)
	}
	if err := vocab.ValidateMemberID(*id); err != nil {
		return badConfig("--id: %v", err)
	}
	if err := vocab.ValidateAddr("--raft-addr", *raftAddr, true); err != nil {
		return badConfig("%v", err)
	}
	if entries, err := os.ReadDir(*dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("data dir %s is not empty (it holds %s): restore seeds a new member, give it an empty --data-dir", *dir, entries[0].Name())
	}
	bf, err := backup.Open(*file)
	if err != nil {
		return fmt.Errorf("refusing to restore: %w", err)
	}
	defer bf.Close()
	st, err := backup.Validate(bf.Body())
	if err != nil {
		return fmt.Errorf("refusing to restore %s: %w", *file, err)
	}
	if floor < st.NextID() {
		return badConfig("--id-floor %d is below the backup's own next ID %d; give the old cluster's highest next ID (or more)", floor, st.NextID())
	}
	tso := max(*tsFloor, now.Add(restoreTSOMargin).UnixMilli(), st.TSOLimitPhysicalMs())
	ident, err := datadir.RestoreDataDir(datadir.RestoreConfig{Dir: *dir, ID: *id, RaftAddr: *raftAddr,
		Body: bf.Body(), Index: bf.Header.Index, Term: bf.Header.Term, IDFloor: floor, TSOFloorMs: tso, NowMs: now.UnixMilli(),
		LogStore: *logStore})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if *asJSON {
		return writeJSONTo(stdout, map[string]any{"data_dir": *dir, "member_id": *id, "cluster_id": ident.ClusterID,
			"from_cluster_id": bf.Header.ClusterID, "index": bf.Header.Index, "term": bf.Header.Term, "sha256": bf.SHA256,
			"id_floor": floor, "tso_floor_unix_ms": tso})
	}
	_, err = fmt.Fprintf(stdout, "Restored %s (cluster %s, index %d, term %d) into %s as member %s of new cluster %s.\n"+
		"Its first ID is at least %d and its first timestamp at least %s (Unix ms %d).\n"+
		"Start it with 'coordd serve --id %s --data-dir %s --raft-addr %s ...' (no --peers or --join needed),\n"+
		"then start every other member with an empty data dir and --join (docs/operations.md#backup-and-restore).\n",
		*file, bf.Header.ClusterID, bf.Header.Index, bf.Header.Term, *dir, *id, ident.ClusterID,
		floor, time.UnixMilli(tso).UTC().Format(time.RFC3339), tso, *id, *dir, *raftAddr)
	return err
}

// inspectCmd: coordd inspect --data-dir DIR.
func inspectCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coordd inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "a stopped member's data dir")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseOffline(fs, args, "data-dir"); err != nil {
		return err
	}
	rep, err := datadir.InspectDataDir(*dir)
	if err != nil {
		return err
	}
	sum, err := backup.SummarizeState(rep.State)
	if err != nil {
		return fmt.Errorf("summarize state: %w", err)
	}
	if *asJSON {
		return writeJSONTo(stdout, struct {
			*datadir.DataDirReport
			State backup.Summary `json:"state"`
			// The allocators, for `coordd restore --id-floor` / --ts-floor-ms.
			NextID   uint64 `json:"allocator_next_id"`
			TSOLimit int64  `json:"tso_limit_unix_ms"`
		}{rep, sum, rep.State.NextID(), rep.State.TSOLimitPhysicalMs()})
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Data dir:\t%s\n", rep.Dir)
	fmt.Fprintf(w, "Member:\t%s (incarnation %s)\n", rep.Identity.MemberID, rep.Identity.Incarnation)
	fmt.Fprintf(w, "Cluster ID:\t%s\n", orDash(rep.Identity.ClusterID))
	fmt.Fprintf(w, "Current term:\t%d\n", rep.CurrentTerm)
	fmt.Fprintf(w, "Log store:\t%s\n", rep.LogStore)
	fmt.Fprintf(w, "Last index:\t%d (term %d)\n", rep.LastIndex, rep.LastTerm)
	fmt.Fprintf(w, "Log reach:\tentries up to %d stored durably (%s)\n", rep.LogReach, datadir.LogReachFile)
	if rep.FirstIndex == 0 {
		fmt.Fprintf(w, "Log:\tempty (the state is all in the newest snapshot)\n")
	} else {
		fmt.Fprintf(w, "Log:\tentries %d..%d\n", rep.FirstIndex, rep.LastIndex)
	}
	var conf []string
	for _, s := range rep.Configuration {
		suffrage := "voter"
		if !s.Voter {
			suffrage = "nonvoter"
		}
		conf = append(conf, fmt.Sprintf("%s=%s (%s)", s.ID, s.RaftAddr, suffrage))
	}
	fmt.Fprintf(w, "Configuration:\t%s (written at index %d)\n", orDash(strings.Join(conf, ", ")), rep.ConfigurationIndex)
	for i, s := range rep.Snapshots {
		label := ""
		if i == 0 {
			label = "Snapshots:"
		}
		fmt.Fprintf(w, "%s\t%s: index %d, term %d, %d bytes\n", label, s.ID, s.Index, s.Term, s.Size)
	}
	fmt.Fprintf(w, "State:\tapplied index %d, %d records\n", sum.AppliedIndex, sum.Records)
	fmt.Fprintf(w, "Allocator next ID:\t%d\n", rep.State.NextID())
	fmt.Fprintf(w, "TSO limit:\tUnix ms %d\n", rep.State.TSOLimitPhysicalMs())
	for _, t := range sum.Tables {
		fmt.Fprintf(w, "\t  %s: %d (%d bytes)\n", t.Name, t.Count, t.Bytes)
	}
	return w.Flush()
}

// peerEntry is one line of a peers file (the shape Consul's peers.json
// uses, so operators recognise it).
type peerEntry struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	NonVoter bool   `json:"non_voter"`
}

// readPeersFile parses and checks a peers file.
func readPeersFile(path string) ([]raftnode.Server, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, badConfig("--peers-file: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var entries []peerEntry
	if err := dec.Decode(&entries); err != nil {
		return nil, badConfig("--peers-file %s: want a JSON array of {\"id\", \"address\", \"non_voter\"}: %v", path, err)
	}
	if len(entries) == 0 {
		return nil, badConfig("--peers-file %s lists no members", path)
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	var out []raftnode.Server
	for i, e := range entries {
		if err := vocab.ValidateMemberID(e.ID); err != nil {
			return nil, badConfig("--peers-file %s: entry %d: %v", path, i+1, err)
		}
		if err := vocab.ValidateAddr("address", e.Address, true); err != nil {
			return nil, badConfig("--peers-file %s: entry %d (%s): %v", path, i+1, e.ID, err)
		}
		if ids[e.ID] || addrs[e.Address] {
			return nil, badConfig("--peers-file %s: entry %d (%s): duplicate id or address", path, i+1, e.ID)
		}
		ids[e.ID], addrs[e.Address] = true, true
		out = append(out, raftnode.Server{ID: e.ID, RaftAddr: e.Address, Voter: !e.NonVoter})
	}
	return out, nil
}

// recoverCmd: coordd recover --data-dir DIR --peers-file FILE.
func recoverCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("coordd recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("data-dir", "", "the stopped survivor's data dir")
	peersFile := fs.String("peers-file", "", "JSON array of the new configuration: [{\"id\": ..., \"address\": raft host:port, \"non_voter\": false}]")
	if err := parseOffline(fs, args, "data-dir", "peers-file"); err != nil {
		return err
	}
	servers, err := readPeersFile(*peersFile)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(*dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("data dir %s does not exist", *dir)
	}
	if err := raftnode.RecoverDataDir(*dir, servers); err != nil {
		return err
	}
	rep, err := datadir.InspectDataDir(*dir)
	if err != nil {
		return fmt.Errorf("read the recovered data dir back: %w", err)
	}
	var ids []string
	for _, s := range rep.Configuration {
		ids = append(ids, s.ID+"="+s.RaftAddr)
	}
	_, err = fmt.Fprintf(stdout, "Recovered %s: the configuration is now %s; the state is at index %d (term %d).\n"+
		"Start the member as before, then add new members with an empty data dir and --join (docs/operations.md#quorum-loss).\n",
		*dir, strings.Join(ids, ", "), rep.LastIndex, rep.LastTerm)
	return err
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
