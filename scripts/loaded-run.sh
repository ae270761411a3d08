#!/usr/bin/env bash
# Runs test suites back to back while busy loops keep every core at 100 %: a test that passes
# only on an idle machine fails here. Default: the abuse and ingest suites, 20 times.
#
#   bash scripts/loaded-run.sh [RUNS] [SUITE...]      e.g. bash scripts/loaded-run.sh 20 abuse ingest
#
# Needs the built site and binaries (`cargo xtask test` or `cargo xtask dist` first); each run gets a
# throwaway PostgreSQL server (`cargo xtask with-postgres`). Prints one line per run and a total;
# exits non-zero if any run failed (their output is kept under target/loaded-run/).
set -uo pipefail
cd "$(dirname "$0")/.."
runs="${1:-20}"
shift || true
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(abuse ingest)
args=()
for s in "${suites[@]}"; do args+=(--test "$s"); done

export HEADROOM_SITE="$PWD/site/dist" HEADROOM_BIN_DIR="${CARGO_TARGET_DIR:-$PWD/target}/debug"
cargo test --quiet --no-run "${args[@]}" >/dev/null 2>&1 || { echo "the suites do not build: run cargo xtask test first" >&2; exit 2; }

cores=$(nproc)
busy=()
for _ in $(seq "$cores"); do
  ( while :; do :; done ) &
  busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
echo "[loaded-run] ${#busy[@]} busy loops on $cores cores; ${suites[*]} x $runs" >&2

logs="${CARGO_TARGET_DIR:-$PWD/target}/loaded-run"
mkdir -p "$logs"
failed=0
started=$(date +%s)
for i in $(seq "$runs"); do
  t0=$(date +%s)
  if cargo xtask with-postgres -- cargo test --quiet "${args[@]}" >"$logs/run-$i.log" 2>&1; then
    echo "[loaded-run] run $i: ok ($(( $(date +%s) - t0 )) s)"
  else
    failed=$((failed + 1))
    echo "[loaded-run] run $i: FAILED ($(( $(date +%s) - t0 )) s): $logs/run-$i.log"
  fi
done
echo "[loaded-run] ${suites[*]}: $runs runs under load, $((runs - failed)) passed, $failed failed, $(( $(date +%s) - started )) s"
[ "$failed" = 0 ]
