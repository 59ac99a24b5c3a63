#!/usr/bin/env bash
# The storage table of README.md ("Storage I/O, O_DIRECT and fsync"): pinned-producer (one
# producer, one shard, 1000 x 1000 B batches) with segment files through the page cache or
# O_DIRECT, over io_uring and posix, without and with enforce_fsync; and the round trip of
# one message (end-to-end-producing-consumer -P 1) beside Redis Streams. Configurations are
# interleaved, ROUNDS times, so they share the machine's state; every run holds
# /tmp/bench.lock. BASE (optional): a checkout of another commit (e.g. a git worktree of
# main) measured in the same rounds, its server run with PYTHONPATH=$BASE.
# Run from the repository: PATH=.venv/bin:$PATH BASE=../base bash scripts/storage_ab.sh
set -euo pipefail
OUT=${OUT:-bench-results}
ROUNDS=${ROUNDS:-3}
HERE=$(pwd)
row() { grep -E "sum|server:" | sed "s/^/$1  /"; }

producer() {  # label checkout "VAR=value ..." [--enforce-fsync]
  local label=$1 checkout=$2 vars=$3; shift 3
  env PYTHONPATH="$checkout" $vars flock /tmp/bench.lock lurcher-bench pinned-producer "$@" \
    --no-progress --no-charts --output-dir "$OUT" | row "$label"
}

round_trip() {  # label checkout "VAR=value ..." [--target redis]
  local label=$1 checkout=$2 vars=$3; shift 3
  env PYTHONPATH="$checkout" $vars flock /tmp/bench.lock lurcher-bench \
    end-to-end-producing-consumer --messages-per-batch 1 --message-batches 20000 "$@" \
    --no-progress --no-charts --output-dir "$OUT" | row "$label"
}

for round in $(seq "$ROUNDS"); do
  echo "### round $round"
  for fsync in "" "--enforce-fsync"; do
    if [ -n "${BASE:-}" ]; then producer "base$fsync" "$BASE" "" $fsync; fi
    for io in uring posix; do
      for direct in false true; do
        producer "$io-direct=$direct$fsync" "$HERE" \
          "LURCHER_SYSTEM_IO=$io LURCHER_SYSTEM_SEGMENT_DIRECT_IO=$direct" $fsync
      done
    done
  done
  if [ -n "${BASE:-}" ]; then round_trip "e2e-base" "$BASE" ""; fi
  for direct in false true; do
    round_trip "e2e-direct=$direct" "$HERE" "LURCHER_SYSTEM_SEGMENT_DIRECT_IO=$direct"
  done
  round_trip "e2e-redis" "$HERE" "" --target redis
done
