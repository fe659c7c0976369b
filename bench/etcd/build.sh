#!/usr/bin/env bash
# Builds the etcd v3.6.16 server and the etcd `benchmark` tool (go.etcd.io/etcd/v3@v3.6.8,
# tools/benchmark) into $CACHE/bin, from throwaway Go modules under $CACHE (never in the repo).
# `go install pkg@version` refuses these modules (their go.mod has replace directives), so each
# one is added as a dependency of a scratch module and its main package is built from there.
# Skips whatever is already built. Prints the bin dir on its last line.
set -euo pipefail

CACHE="${COORDD_BENCH_CACHE:-$HOME/.cache/coordd-bench}"
BIN="$CACHE/bin"
ETCD_VERSION=v3.6.16      # go.etcd.io/etcd/server/v3
BENCH_VERSION=v3.6.8      # go.etcd.io/etcd/v3 (newest version the proxy serves; holds tools/benchmark)

export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"   # last -mod wins
export GOWORK=off

# build_tool NAME MODULE@VERSION PACKAGE
build_tool() {
  local name=$1 modver=$2 pkg=$3
  if [[ -x "$BIN/$name" ]]; then
    echo "build.sh: $BIN/$name exists, skipping" >&2
    return
  fi
  local dir="$CACHE/build-$name"
  rm -rf "$dir"
  mkdir -p "$dir" "$BIN"
  echo "build.sh: building $name from $modver ..." >&2
  (
    cd "$dir"
    go mod init "coordd-bench/build-$name" >&2
    go get "$modver" >&2
    go build -o "$BIN/$name.tmp" "$pkg" >&2
  )
  mv "$BIN/$name.tmp" "$BIN/$name"   # only a finished build counts as "already built"
}

build_tool etcd "go.etcd.io/etcd/server/v3@$ETCD_VERSION" go.etcd.io/etcd/server/v3
build_tool benchmark "go.etcd.io/etcd/v3@$BENCH_VERSION" go.etcd.io/etcd/v3/tools/benchmark

"$BIN/etcd" --version >&2   # (no `| head`: with pipefail, SIGPIPE would fail the script)
echo "$BIN"
