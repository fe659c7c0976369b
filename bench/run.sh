#!/usr/bin/env bash
# make bench: coordd's numbers, and a 3-member etcd measured in the same run
# as the baseline for the coordination workloads. Everything binds
# 127.0.0.1; every workload is bounded in time and count. Prints one JSON
# line per result and a summary table with the ratios.
#
# First the comparison with the etcd-backed peer (bench/etcdcoord, its own
# Go module): workloads w1..w5 at COMPARE_CLIENTS (default 1,16,64), each
# cell COMPARE_DURATION long on each side, then w6 (streaming node churn) in
# a run of its own (both systems start with rebalancing of recently assigned
# channels allowed, which the other workloads must not have; COMPARE_W6=0
# skips it), one JSON line per cell and a table. COMPARE_ONLY=1 stops after
# it. COMPARE_COORDD_FLAGS adds flags to every coordd member (e.g.
# "--raft-log-store bolt", the store before 2026-12-05); COMPARE_PEER_FLAGS adds flags to etcdcoord (e.g.
# "-broadcast-ack-batching=false": one etcd transaction per broadcast ack).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10s}
TRIALS=${TRIALS:-10}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go build -tags hashicorpmetrics -o bin/coordd ./cmd/coordd
go build -tags hashicorpmetrics -o bin/streamingnode ./cmd/streamingnode
go build -tags hashicorpmetrics -o bin/coordbench ./bench/coordbench
(cd bench/etcdcoord && GOWORK=off go build -o ../../bin/etcdcoord .)
ETCD_BIN=$(bash bench/etcd/build.sh | tail -n 1)/etcd

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3)"

run() { local name=$1; shift; bin/coordbench "$@" | tee "$out/$name.json"; }

bin/coordbench -compare -workload "${COMPARE_WORKLOADS:-w1,w2,w3,w4,w5}" -clients "${COMPARE_CLIENTS:-1,16,64}" \
  -duration "${COMPARE_DURATION:-5s}" -etcd "$ETCD_BIN" -coordd-flags "${COMPARE_COORDD_FLAGS:-}" \
  -peer-flags "${COMPARE_PEER_FLAGS:-}" | tee "$out/compare.json"
if [[ ${COMPARE_W6:-1} != 0 ]]; then
  bin/coordbench -compare -workload w6 -clients "${COMPARE_CLIENTS:-1,16,64}" \
    -duration "${COMPARE_DURATION:-5s}" -etcd "$ETCD_BIN" | tee -a "$out/compare.json"
fi
python3 - "$out/compare.json" <<'PY'
import json, sys
print()
print("| workload | variant | clients | coordd ops/s (p50 / p99 ms) | peer ops/s (p50 / p99 ms) | ratio | coordd commands per leader fsync | CPU s per 1k ops (coordd / peer) |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for line in open(sys.argv[1]):
    r = json.loads(line)
    cpf = r.get("coordd_commands_per_store_commit", "")
    print(f"| {r['workload']} | {r['variant']} | {r['clients']} | {r['coordd_ops']:.0f} ({r['coordd_p50_ms']:.1f} / {r['coordd_p99_ms']:.1f}) | "
          f"{r['peer_ops']:.0f} ({r['peer_p50_ms']:.1f} / {r['peer_p99_ms']:.1f}) | {r['ratio']:.2f}x | {cpf} | "
          f"{r.get('coordd_cpu_s_per_1k_ops', '')} / {r.get('peer_cpu_s_per_1k_ops', '')} |")
    if r.get("coordd_values_per_s"):  # values per call > 1: allocations of 100, batched checkpoints
        print(f"|  | values/s |  | {r['coordd_values_per_s']:.0f} | {r.get('peer_values_per_s', 0):.0f} |  |  |  |")
    if r.get("coordd_round"):
        print("|  | round (ms) |  | " + ", ".join(f"{k} {v}" for k, v in sorted(r["coordd_round"].items())) + " |  |  |  |  |")
PY
[[ -n ${COMPARE_ONLY:-} ]] && exit 0
run commit -workload commit -clients "$CLIENTS" -duration "$DURATION"
run alloc-ts -workload alloc-ts -clients "$CLIENTS" -duration "$DURATION"
run alloc-id -workload alloc-id -clients "$CLIENTS" -duration "$DURATION"
run status -workload status -clients "$CLIENTS" -duration "$DURATION"
run failover -workload failover -trials "$TRIALS"
run sn-failover -workload sn-failover -trials "$TRIALS" -node-ttl 3s
run balance -workload balance -pchannels 256 -streaming-nodes 8
run watchers -workload watchers -watchers 1000 -trials "$TRIALS"
run broadcast -workload broadcast -clients 16
run flush -workload flush -trials "$TRIALS"
run manifest -workload manifest -clients "$CLIENTS" -duration "$DURATION"
bash bench/etcd/run.sh "$CLIENTS" 60000 | tail -n 1 | tee "$out/etcd.json"

python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
r = {n: json.load(open(os.path.join(d, n + ".json"))) for n in
     ["commit", "alloc-ts", "alloc-id", "status", "failover", "sn-failover", "balance", "watchers", "broadcast", "etcd"]}
c, e = r["commit"], r["etcd"]
print()
print("| figure | value | ratio / goal |")
print("| --- | --- | --- |")
print(f"| coordd commit (RegisterMember, one small command), {c['clients']} clients | {c['ops_per_sec']:.0f} ops/s, p50 {c['p50_ms']:.1f} ms, p99 {c['p99_ms']:.1f} ms | {c['ops_per_sec']/e['ops_per_sec']:.2f}x etcd put |")
print(f"| etcd 3.6.16 put, {e['clients']} clients | {e['ops_per_sec']:.0f} ops/s, p50 {e['p50_ms']:.1f} ms, p99 {e['p99_ms']:.1f} ms | 1.00x |")
for k in ["alloc-ts", "alloc-id"]:
    a = r[k]
    print(f"| {k}, {a['clients']} clients | {a['ops_per_sec']:.0f} ops/s, p50 {a['p50_ms']:.2f} ms, p99 {a['p99_ms']:.1f} ms | {a['ops_per_sec']/c['ops_per_sec']:.1f}x coordd commit |")
st = r["status"]
print(f"| Status RPC (no raft work: the RPC layer's ceiling here), {st['clients']} clients | {st['ops_per_sec']:.0f} ops/s, p50 {st['p50_ms']:.2f} ms, p99 {st['p99_ms']:.1f} ms | {st['ops_per_sec']/c['ops_per_sec']:.1f}x coordd commit |")
f = r["failover"]
print(f"| leader SIGKILL -> first committed write ({f['trials']} trials) | median {f['median_ms']:.0f} ms, max {f['max_ms']:.0f} ms | goal < 1500 ms |")
s = r["sn-failover"]
print(f"| streaming node SIGKILL -> all its PChannels ASSIGNED elsewhere (TTL {s['ttl_ms']} ms, {s['trials']} trials) | median {s['median_ms']:.0f} ms, max {s['max_ms']:.0f} ms | goal < TTL + 1000 ms |")
b = r["balance"]
print(f"| {b['pchannels']} PChannels over {b['nodes']} streaming nodes from scratch | {b['median_ms']:.0f} ms to all ASSIGNED, {b['min_per_node']}..{b['max_per_node']} per node | |")
w = r["watchers"]
print(f"| commit -> last of {w['watchers']} watchers holds the new version ({w['trials']} trials) | median {w['median_ms']:.0f} ms, max {w['max_ms']:.0f} ms | |")
bc = r["broadcast"]
for cell in bc["cells"]:
    kind = "conflicting" if cell["conflicting"] else "non-conflicting"
    print(f"| broadcast, {cell['targets']} targets, {kind}, {bc['clients']} callers | p50 {cell['p50_ms']:.0f} ms, p99 {cell['p99_ms']:.0f} ms, {cell['ops_per_sec']:.0f}/s | |")
print(f"| leader SIGKILL -> every in-flight broadcast (16 targets) completed | {bc['median_ms']:.0f} ms | |")
PY
