#!/usr/bin/env bash
# make bench: coordd's numbers and a 3-member etcd measured in the same run.
# Everything binds 127.0.0.1; every workload is bounded in time and count.
# Prints one JSON line per result and a summary with the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

CLIENTS=${CLIENTS:-64}
DURATION=${DURATION:-10s}
TRIALS=${TRIALS:-10}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

go build -tags hashicorpmetrics -o bin/coordd ./cmd/coordd
go build -tags hashicorpmetrics -o bin/coordbench ./bench/coordbench

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(go version | cut -d' ' -f3)"

for w in commit alloc-ts alloc-id; do
  bin/coordbench -workload "$w" -clients "$CLIENTS" -duration "$DURATION" | tee "$out/$w.json"
done
bin/coordbench -workload failover -trials "$TRIALS" | tee "$out/failover.json"
bash bench/etcd/run.sh "$CLIENTS" 60000 | tail -n 1 | tee "$out/etcd.json"

python3 - "$out" <<'PY'
import json, sys, os
d = sys.argv[1]
r = {n: json.load(open(os.path.join(d, n + ".json"))) for n in ["commit", "alloc-ts", "alloc-id", "failover", "etcd"]}
c, e = r["commit"], r["etcd"]
print()
print("| figure | value | ratio |")
print("| --- | --- | --- |")
print(f"| coordd commit, {c['clients']} clients | {c['ops_per_sec']:.0f} ops/s, p50 {c['p50_ms']:.1f} ms, p99 {c['p99_ms']:.1f} ms | {c['ops_per_sec']/e['ops_per_sec']:.2f}x etcd put |")
print(f"| etcd 3.6.16 put, {e['clients']} clients | {e['ops_per_sec']:.0f} ops/s, p50 {e['p50_ms']:.1f} ms, p99 {e['p99_ms']:.1f} ms | 1.00x |")
for k in ["alloc-ts", "alloc-id"]:
    a = r[k]
    print(f"| {k}, {a['clients']} clients | {a['ops_per_sec']:.0f} ops/s, p50 {a['p50_ms']:.2f} ms, p99 {a['p99_ms']:.1f} ms | {a['ops_per_sec']/c['ops_per_sec']:.1f}x coordd commit |")
f = r["failover"]
print(f"| leader SIGKILL -> first committed write ({f['trials']} trials) | median {f['median_ms']:.0f} ms, max {f['max_ms']:.0f} ms | goal < 1500 ms |")
PY
