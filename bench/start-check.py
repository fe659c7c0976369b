#!/usr/bin/env python3
"""Fresh-start placement check (docs/operations.md#placement).

Starts `coordd dev` with two reference streaming nodes on a fresh data dir,
RUNS times. Each run records how long until each node holds half the
PChannels (±1), then starts a third streaming node and records how long
until it holds its third (±1). Prints one line per run and a summary;
exits 1 when a run misses a bound (15 s for the start, 30 s for the third
node).

usage: bench/start-check.py [RUNS]   (binaries from bin/, `make build`)
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

BASE = 47001
ENDPOINTS = ",".join(f"127.0.0.1:{BASE + i}" for i in range(3))
START_BOUND, THIRD_BOUND = 15.0, 30.0


def owners():
    """ASSIGNED pchannels per node, or None when the cluster does not answer."""
    try:
        out = subprocess.run(["bin/coordctl", "--endpoints", ENDPOINTS, "pchannel", "list"],
                             capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode != 0:
        return None
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    per, total = {}, 0
    for r in rows:  # NAME TERM STATE NODE ...; other lines are notes
        if len(r) < 4 or not r[1].isdigit():
            continue
        total += 1
        if r[2] == "ASSIGNED":
            per[r[3]] = per.get(r[3], 0) + 1
    return per, total


def balanced(per, total, nodes):
    if len(per) < nodes:
        return False
    share = total / nodes
    return sum(per.values()) == total and all(abs(n - share) <= 1 for n in per.values())


def wait_balanced(nodes, bound, t0):
    last = None
    while time.monotonic() - t0 < bound * 2:
        got = owners()
        if got:
            last = got
            if balanced(*got, nodes):
                return time.monotonic() - t0, got
        time.sleep(0.2)
    return None, last


def run(i, root):
    data = os.path.join(root, f"run{i}")
    dev = subprocess.Popen(["bin/coordd", "dev", "--data-dir", data, "--base-port", str(BASE)],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, f"dev{i}.log"), "w"),
                           start_new_session=True)
    third = None
    try:
        t0 = time.monotonic()
        start, got = wait_balanced(2, START_BOUND, t0)
        if start is None:
            return False, f"run {i}: two nodes never balanced; last view {got}"
        wal = os.path.join(data, "sn3-wal")
        third = subprocess.Popen(["bin/streamingnode", "--coord", ENDPOINTS, "--addr", "127.0.0.1:0", "--wal-dir", wal],
                                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(root, f"sn3-{i}.log"), "w"),
                                 start_new_session=True)
        t1 = time.monotonic()
        later, got3 = wait_balanced(3, THIRD_BOUND, t1)
        ok = start <= START_BOUND and later is not None and later <= THIRD_BOUND
        return ok, (f"run {i}: 2 nodes balanced {start:.1f} s {dict(sorted(got[0].items()))}; third node "
                    + (f"balanced {later:.1f} s {dict(sorted(got3[0].items()))}" if later else f"never balanced: {got3}"))
    finally:
        for p in (third, dev):
            if p is not None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    root = tempfile.mkdtemp(prefix="coordd-start-check-")
    passed = 0
    for i in range(1, runs + 1):
        ok, line = run(i, root)
        passed += ok
        print(("PASS " if ok else "FAIL ") + line, flush=True)
    print(f"{passed}/{runs} runs within the bounds (start {START_BOUND:.0f} s, third node {THIRD_BOUND:.0f} s); logs in {root}")
    if passed == runs:
        shutil.rmtree(root)
    sys.exit(0 if passed == runs else 1)


if __name__ == "__main__":
    main()
