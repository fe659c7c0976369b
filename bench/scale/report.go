package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

type joinResult struct {
	ID        string
	Took      time.Duration
	Elections uint64
	RSS       map[string]float64
}

type report struct {
	cfg                config
	commit             string
	start              time.Time
	loadStart, loadEnd string
	seed               *seedInfo
	restore            time.Duration
	firstReady         time.Duration
	joins              []joinResult
	rows               []rowResult
	kills              []killResult
	replace            *replaceResult
	ddl                *ddlResult
	rssEnd             map[string]float64
	mon                *monitor
}

func fmtRSS(m map[string]float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ") + " MiB"
}

func printRow(r rowResult) {
	for _, n := range milvusMax {
		s := r.Ops[n.name]
		fmt.Printf("    %-32s %7.1f/s offered, %7.1f/s done, p50 %6.1f ms, p99 %7.1f ms, max %7.1f ms, %d errors, %d behind %s\n",
			n.name, r.Rates[n.name], float64(s.N)/r.Duration.Seconds(), ms(s.P50), ms(s.P99), ms(s.Max), s.Errs, s.Behind, firstErr(s))
	}
	fmt.Printf("    heartbeats %d (p99 %.1f ms, %d errors %s), %d watchers got %d pushes, probe max %.1f ms, leader CPU %.2f cores (all members %.2f, generator %.2f), RSS %s, %d elections, raft snapshots %v, state %.1f MiB\n",
		r.Heartbeat.N, ms(r.Heartbeat.P99), r.Heartbeat.Errs, firstErr(r.Heartbeat), r.Watchers, r.Pushes, ms(r.Probe.Max), r.LeaderCPU, r.AllCPU, r.SelfCPU, fmtRSS(r.RSS), r.Elections, r.Snapshots, r.StateMiB)
	if r.Backup > 0 {
		fmt.Printf("    backup stream during the row: %.1f MiB in %.1f s; longest probe write meanwhile %.1f ms\n", r.BackupMiB, r.Backup.Seconds(), ms(r.BackupMax))
	}
}

func firstErr(s summary) string {
	if len(s.FirstErr) == 0 {
		return ""
	}
	e := s.FirstErr[0]
	if len(e) > 160 {
		e = e[:160] + "…"
	}
	return "(first: " + e + ")"
}

// sustained is a row's achieved calls/s of the kind over its 1× need.
func sustained(r rowResult, n need) float64 {
	s := r.Ops[n.name]
	return float64(s.N) / r.Duration.Seconds() / n.perSec
}

func pctl(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	l := append([]time.Duration(nil), ds...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return l[min(len(l)-1, int(p*float64(len(l))))]
}

// print writes the one table: every figure of the run with its goal
// (docs/scaling.md#milvus-max), then the elections' evidence.
func (rep *report) print(w io.Writer) {
	c := rep.cfg
	fmt.Fprintf(w, "\n## Milvus-max on coordd: %d segments, %d VChannels / %d PChannels, %d tombstones, %d streaming nodes\n\n",
		c.Segments, c.VChannels, c.PChannels, c.Tombstones, c.Nodes)
	fmt.Fprintf(w, "commit %s; load average at start %s, at end %s; %s wall\n\n", rep.commit, rep.loadStart, rep.loadEnd, time.Since(rep.start).Round(time.Second))
	fmt.Fprintln(w, "| phase | measure | figure | goal |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	row := func(phase, measure, figure, goal string) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", phase, measure, figure, goal)
	}
	if s := rep.seed; s != nil {
		row("seed", "synthetic backup", fmt.Sprintf("%.1f MiB (built %.1f s, written %.1f s)", float64(s.Bytes)/(1<<20), s.Build.Seconds(), s.Write.Seconds()), "")
		row("seed", "coordd restore into m1", fmt.Sprintf("%.1f s", rep.restore.Seconds()), "")
		row("seed", "m1 start until serving", fmt.Sprintf("%.1f s", rep.firstReady.Seconds()), "")
	}
	for _, j := range rep.joins {
		row("join", j.ID+" (empty dir, --join) until caught up", fmt.Sprintf("%.1f s, %d elections; RSS %s", j.Took.Seconds(), j.Elections, fmtRSS(j.RSS)), "< 60 s, 0 elections")
	}
	for _, r := range rep.rows {
		ph := fmt.Sprintf("load %g× (%v, load avg %s)", r.Factor, r.Duration, r.Load)
		goal := "p99 < 50 ms"
		if r.Factor > 1 {
			goal = "p99 < 200 ms"
		}
		worst := -1.0
		for _, n := range milvusMax {
			s := r.Ops[n.name]
			x := sustained(r, n)
			if worst < 0 || x < worst {
				worst = x
			}
			row(ph, n.name, fmt.Sprintf("%.1f/s of %.1f/s offered (%.2f× need); p50 %.1f / p99 %.1f / max %.1f ms; %d errors, %d behind",
				float64(s.N)/r.Duration.Seconds(), r.Rates[n.name], x, ms(s.P50), ms(s.P99), ms(s.Max), s.Errs, s.Behind), goal)
		}
		if a, ok := r.Ops["AssignSegmentID"]; ok {
			row(ph, "AssignSegmentID (after seals)", fmt.Sprintf("%d calls; p50 %.1f / p99 %.1f / max %.1f ms; %d errors", a.N, ms(a.P50), ms(a.P99), ms(a.Max), a.Errs), "")
		}
		row(ph, fmt.Sprintf("Heartbeat (%d nodes)", c.Nodes), fmt.Sprintf("%d calls; p50 %.1f / p99 %.1f / max %.1f ms; %d errors", r.Heartbeat.N, ms(r.Heartbeat.P50), ms(r.Heartbeat.P99), ms(r.Heartbeat.Max), r.Heartbeat.Errs), goal)
		row(ph, "assignment watchers", fmt.Sprintf("%d open, %d pushes", r.Watchers, r.Pushes), "")
		row(ph, "probe write (1 checkpoint / 100 ms)", fmt.Sprintf("p50 %.1f / p99 %.1f / max %.1f ms", ms(r.Probe.P50), ms(r.Probe.P99), ms(r.Probe.Max)), "")
		row(ph, "**sustained ÷ need (lowest kind)**", fmt.Sprintf("**%.2f×**", worst), "≥ 5× in the 5× row")
		row(ph, "leader CPU; all members' CPU; load generator CPU; RSS per member", fmt.Sprintf("%.2f cores; %.2f cores; %.2f cores; %s", r.LeaderCPU, r.AllCPU, r.SelfCPU, fmtRSS(r.RSS)), "RSS < 2 GiB")
		row(ph, "elections; raft snapshots; state", fmt.Sprintf("%d; %v; %.1f MiB", r.Elections, r.Snapshots, r.StateMiB), "0 elections")
		if r.Backup > 0 {
			row(ph, "backup (SaveSnapshot) during the row", fmt.Sprintf("%.1f MiB in %.1f s; longest probe write meanwhile %.1f ms", r.BackupMiB, r.Backup.Seconds(), ms(r.BackupMax)), "")
		}
	}
	if len(rep.kills) > 0 {
		var wr, pu, rs []time.Duration
		var el uint64
		errs := 0
		for _, k := range rep.kills {
			wr, pu, rs = append(wr, k.Write), append(pu, k.Push), append(rs, k.Restart)
			el += k.Elections
			if k.Err != "" {
				errs++
			}
		}
		ph := fmt.Sprintf("%d × SIGKILL of the leader", len(rep.kills))
		row(ph, "first committed write", fmt.Sprintf("p50 %.0f / p99 %.0f / max %.0f ms", ms(pctl(wr, .5)), ms(pctl(wr, .99)), ms(pctl(wr, 1))), "p99 < 1 s")
		row(ph, "first assignment push of the new term", fmt.Sprintf("p50 %.0f / max %.0f ms", ms(pctl(pu, .5)), ms(pctl(pu, 1))), "")
		row(ph, "killed member restarted from its data dir, until serving", fmt.Sprintf("p50 %.1f / max %.1f s", pctl(rs, .5).Seconds(), pctl(rs, 1).Seconds()), "< 30 s")
		row(ph, "elections (all kills); failed episodes", fmt.Sprintf("%d; %d", el, errs), "")
	}
	if r := rep.replace; r != nil {
		row("replace", fmt.Sprintf("%s → %s (empty data dir) until caught up", r.Old, r.New), fmt.Sprintf("%.1f s, %d elections %s", r.CatchUp.Seconds(), r.Elections, r.Err), "< 60 s, 0 elections")
	}
	if d := rep.ddl; d != nil {
		ph := fmt.Sprintf("bulk DDL (%d clients)", d.Clients)
		row(ph, fmt.Sprintf("%d CreateCollection (1 shard)", d.N), fmt.Sprintf("%.1f s (%.0f/s); p50 %.1f / p99 %.1f / max %.1f ms; %d errors",
			d.Create.Seconds(), float64(d.CreateSt.N)/d.Create.Seconds(), ms(d.CreateSt.P50), ms(d.CreateSt.P99), ms(d.CreateSt.Max), d.CreateSt.Errs), "no error, p99 < 200 ms")
		row(ph, fmt.Sprintf("%d DropCollection", d.N), fmt.Sprintf("%.1f s (%.0f/s); p50 %.1f / p99 %.1f / max %.1f ms; %d errors",
			d.Drop.Seconds(), float64(d.DropSt.N)/d.Drop.Seconds(), ms(d.DropSt.P50), ms(d.DropSt.P99), ms(d.DropSt.Max), d.DropSt.Errs), "no error")
		row(ph, "coordd_state_bytes before / after creates / after drops", fmt.Sprintf("%.1f / %.1f / %.1f MiB", d.StateBefore, d.StateMid, d.StateEnd), "back to before")
		pruned := fmt.Sprintf("not within %v (the members' --segment-dropped-retention, 3 h by default, must pass first)", pruneWait)
		if d.PruneWait > 0 {
			pruned = fmt.Sprintf("%.1f MiB, %.1f s after the drops", d.StatePruned, d.PruneWait.Seconds())
		}
		row(ph, "coordd_state_bytes once the dropped VChannels are forgotten (NotFound)", pruned, "back to before")
		row(ph, "RSS after creates / after drops", fmt.Sprintf("%s / %s", fmtRSS(d.RSSMid), fmtRSS(d.RSSEnd)), "")
	}
	if rep.rssEnd != nil {
		row("end", "RSS per member", fmtRSS(rep.rssEnd), "< 2 GiB")
	}
	if rep.mon != nil {
		by, events := rep.mon.report()
		var parts []string
		for _, k := range sortedKeys(by) {
			parts = append(parts, fmt.Sprintf("%s: %d", k, by[k]))
		}
		row("all", "elections by phase", strings.Join(parts, "; "), "")
		if len(events) > 0 {
			fmt.Fprintln(w, "\nElections, with each member's heap, GC count and longest recent GC pause when the term rose:")
			for _, ev := range events {
				fmt.Fprintln(w, "-", ev)
			}
		}
	}
}
