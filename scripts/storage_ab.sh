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
bench() { flock /tmp/bench.lock lurcher-bench "$@" --no-progress --no-charts --output-dir "$OUT"; }
row() { grep -E "sum|server:" | sed "s/^/$1  /"; }

producer() {  # label checkout io direct_io [--enforce-fsync]
  local label=$1 checkout=$2 io=$3 direct=$4; shift 4
  PYTHONPATH=$checkout LURCHER_SYSTEM_IO=$io LURCHER_SYSTEM_SEGMENT_DIRECT_IO=$direct \
    bench pinned-producer "$@" | row "$label"
}

round_trip() {  # label checkout direct_io [--target redis]
  local label=$1 checkout=$2 direct=$3; shift 3
  PYTHONPATH=$checkout LURCHER_SYSTEM_SEGMENT_DIRECT_IO=$direct \
    bench end-to-end-producing-consumer --messages-per-batch 1 --message-batches 20000 "$@" \
    | grep -E "sum|server:|consumer|actor" | sed "s/^/$label  /"
}

for round in $(seq "$ROUNDS"); do
  echo "### round $round"
  for fsync in "" "--enforce-fsync"; do
    [ -n "${BASE:-}" ] && producer "base-auto${fsync}" "$BASE" auto false $fsync
    for io in uring posix; do
      for direct in false true; do
        producer "$io-direct=$direct${fsync}" "$HERE" "$io" "$direct" $fsync
      done
    done
  done
  [ -n "${BASE:-}" ] && round_trip "base-e2e" "$BASE" false
  round_trip "e2e-direct=false" "$HERE" false
  round_trip "e2e-direct=true" "$HERE" true
  round_trip "e2e-redis" "$HERE" false --target redis
done
