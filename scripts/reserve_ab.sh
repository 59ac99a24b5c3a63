#!/usr/bin/env bash
# The reserve-ahead table of README.md (Performance, "Reserve-ahead"): pinned-producer (one
# producer, one shard, 1000 x 1000 B batches) with system.segment.reserve_ahead "0" and its
# default, without and with enforce_fsync, and with O_DIRECT segment files. Configurations
# are interleaved, ROUNDS times, so they share the machine's state; every run holds
# /tmp/bench.lock. BASE (optional): a checkout of another commit (e.g. a git worktree of
# main) measured in the same rounds on its defaults, its server run with PYTHONPATH=$BASE.
# Run from the repository: PATH=.venv/bin:$PATH BASE=../base bash scripts/reserve_ab.sh
set -euo pipefail
OUT=${OUT:-bench-results}
ROUNDS=${ROUNDS:-3}
HERE=$(pwd)

producer() {  # label checkout "VAR=value ..." [bench options]
  local label=$1 checkout=$2 vars=$3; shift 3
  env PYTHONPATH="$checkout" $vars flock /tmp/bench.lock lurcher-bench pinned-producer "$@" \
    --no-progress --no-charts --output-dir "$OUT" | grep -E "^producers \(sum\)" \
    | sed "s/^/$label  /"
}

for round in $(seq "$ROUNDS"); do
  echo "### round $round"
  for mode in "" "--enforce-fsync" "direct"; do
    vars="" opt=$mode
    if [ "$mode" = direct ]; then vars="LURCHER_SYSTEM_SEGMENT_DIRECT_IO=true" opt=""; fi
    if [ -n "${BASE:-}" ]; then producer "base${mode:+ $mode}" "$BASE" "$vars" $opt; fi
    for ahead in 0 "16MiB"; do
      producer "reserve_ahead=$ahead${mode:+ $mode}" "$HERE" \
        "$vars LURCHER_SYSTEM_SEGMENT_RESERVE_AHEAD=$ahead" $opt
    done
  done
done
