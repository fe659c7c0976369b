#!/usr/bin/env bash
# usage: bench/etcd/run.sh [CLIENTS] [TOTAL_OPS]      (defaults: 64 30000)
#
# etcd baseline: starts a fresh 3-member etcd v3.6.16 cluster on 127.0.0.1, runs the official
# `benchmark put` tool against the leader (16-byte keys, 200-byte values, 100k key space), stops the
# cluster and prints, as its last line, one JSON object:
#   {"system":"etcd-3.6.16","clients":N,"ops":N,"ops_per_sec":F,"p50_ms":F,"p99_ms":F}
# Everything else goes to stderr.
set -euo pipefail

CLIENTS=${1:-64}
TOTAL=${2:-30000}
[[ $CLIENTS =~ ^[1-9][0-9]*$ && $TOTAL =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [CLIENTS] [TOTAL_OPS]" >&2; exit 2; }
CONNS=$(( CLIENTS < 16 ? CLIENTS : 16 ))
BENCH_TIMEOUT=180          # seconds, hard bound on the measured run
CLIENT_PORTS=(23791 23792 23793)
PEER_PORTS=(23801 23802 23803)

log() { echo "run.sh: $*" >&2; }

BIN=$("$(dirname "$0")/build.sh" | tail -n 1)

for p in "${CLIENT_PORTS[@]}" "${PEER_PORTS[@]}"; do   # something already listening there?
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then log "port $p is already in use"; exit 1; fi
done

DATA=$(mktemp -d "${TMPDIR:-/tmp}/coordd-etcd-bench.XXXXXX")
PIDS=()        # etcd members
BENCH_PID=""   # benchmark run in progress (under `timeout`)

cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  if [[ -n $BENCH_PID ]]; then   # stop the load first; timeout passes SIGTERM on to benchmark
    kill "$BENCH_PID" 2>/dev/null
    wait "$BENCH_PID" 2>/dev/null
  fi
  if ((${#PIDS[@]})); then
    # Followers exit at once on SIGTERM; the leader first tries to hand leadership to a peer that
    # is going away too and stalls for several seconds. The data is thrown away, so after a
    # short grace period SIGKILL whatever is left.
    kill "${PIDS[@]}" 2>/dev/null
    for _ in $(seq 20); do   # up to 2 s (kill -0 fails once all are gone)
      kill -0 "${PIDS[@]}" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "${PIDS[@]}" 2>/dev/null
    wait "${PIDS[@]}" 2>/dev/null
  fi
  if ((rc != 0)); then   # show what etcd and the benchmark complained about
    for f in "$DATA"/m?.log; do [[ -s $f ]] && { log "--- ${f##*/}:"; tail -n 10 "$f" >&2; }; done
    grep -ahiE 'error|fatal|panic' "$DATA"/*.out.log 2>/dev/null | tail -n 10 >&2
  fi
  rm -rf "$DATA"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- start the cluster -----------------------------------------------------------------------
CLUSTER=""
ENDPOINTS=""
for i in 0 1 2; do
  CLUSTER+="${CLUSTER:+,}m$i=http://127.0.0.1:${PEER_PORTS[i]}"
  ENDPOINTS+="${ENDPOINTS:+,}127.0.0.1:${CLIENT_PORTS[i]}"
done
for i in 0 1 2; do
  "$BIN/etcd" --name "m$i" --data-dir "$DATA/m$i" \
    --listen-client-urls "http://127.0.0.1:${CLIENT_PORTS[i]}" \
    --advertise-client-urls "http://127.0.0.1:${CLIENT_PORTS[i]}" \
    --listen-peer-urls "http://127.0.0.1:${PEER_PORTS[i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${PEER_PORTS[i]}" \
    --initial-cluster "$CLUSTER" --initial-cluster-state new \
    --initial-cluster-token "coordd-bench-$$" \
    --log-level error >"$DATA/m$i.log" 2>&1 &
  PIDS+=($!)
done
log "started etcd members (pids ${PIDS[*]}), data in $DATA"

# --- wait until every member reports healthy (bounded: 60 x 0.5 s) ---------------------------
healthy() {
  local p
  for p in "${CLIENT_PORTS[@]}"; do
    [[ $(curl -fsS --max-time 2 "http://127.0.0.1:$p/health" 2>/dev/null) == *'"health":"true"'* ]] || return 1
  done
}
for attempt in $(seq 60); do
  for pid in "${PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || { log "etcd member (pid $pid) exited during startup"; exit 1; }
  done
  healthy && break
  ((attempt < 60)) || { log "cluster not healthy after 30 s"; exit 1; }
  sleep 0.5
done
log "cluster healthy"

# --- warm-up, then the measured run ------------------------------------------------------------
bench() { # bench TIMEOUT CLIENTS CONNS TOTAL OUTFILE
  # Run in the background and wait, so that Ctrl-C / SIGTERM reach the trap at once. (Redirect
  # only the command, never the function call: the trap would inherit that redirection.)
  timeout "$1" "$BIN/benchmark" --endpoints="$ENDPOINTS" --target-leader --precise \
    --clients="$2" --conns="$3" \
    put --key-size=16 --val-size=200 --key-space-size=100000 --total="$4" \
    >"$5" 2>"$5.log" &   # stderr is gRPC chatter
  BENCH_PID=$!
  wait "$BENCH_PID"
  BENCH_PID=""
}
log "warm-up: 5000 puts, 16 clients"
bench 60 16 16 5000 "$DATA/warmup.out"

log "measuring: $TOTAL puts, $CLIENTS clients, $CONNS conns (timeout ${BENCH_TIMEOUT}s)"
bench "$BENCH_TIMEOUT" "$CLIENTS" "$CONNS" "$TOTAL" "$DATA/bench.out"
sed -e '/^Response time histogram/,/^$/d' "$DATA/bench.out" >&2   # summary + percentiles, for humans

# ops = successful requests (sum of the histogram buckets); failed requests are not counted.
awk -v sys="etcd-3.6.16" -v c="$CLIENTS" '
  /^Response time histogram/ { h = 1; next }
  h && /^$/                  { h = 0 }
  h && match($0, /\[[0-9]+\]/) { ops += substr($0, RSTART + 1, RLENGTH - 2) }
  /Requests\/sec:/           { rps = $2 }
  /^ *50% in /               { p50 = $3 }
  /^ *99% in /               { p99 = $3 }
  /^Error distribution/      { errs = 1 }
  END {
    if (rps == "" || p50 == "" || p99 == "" || ops == 0) { print "run.sh: could not parse benchmark output" > "/dev/stderr"; exit 1 }
    if (errs) print "run.sh: warning: the benchmark reported errors (see above)" > "/dev/stderr"
    printf "{\"system\":\"%s\",\"clients\":%d,\"ops\":%d,\"ops_per_sec\":%.1f,\"p50_ms\":%.3f,\"p99_ms\":%.3f}\n", sys, c, ops, rps, p50 * 1000, p99 * 1000
  }' "$DATA/bench.out"
