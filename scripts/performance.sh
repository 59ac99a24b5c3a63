#!/usr/bin/env bash
# Re-runs every measurement quoted in README.md ("Performance"), one after the other, and
# prints the tables. Needs the bench extra (pip install -e '.[bench]') and Debian's
# nats-server and redis-server. Takes about 15 minutes on a 2-core machine; run it on an
# otherwise idle machine. Results (JSON, PNG) go to ${OUT:-bench-results}.
set -euo pipefail
OUT=${OUT:-bench-results}
B=bench
bench() { lurcher-bench "$@" --no-progress --output-dir "$OUT"; }
say() { printf '\n### %s\n' "$*"; }

say "1. compare pinned-producer (1 producer, 1000 x 1000 B batches)"
$B compare pinned-producer
say "2. compare pinned-consumer (1 consumer reading 1M stored messages)"
$B compare pinned-consumer
say "3. compare end-to-end-producing-consumer, 1 message per batch"
$B compare end-to-end-producing-consumer --messages-per-batch 1 --message-batches 20000

say "4. shards: pinned-producer, 2 producers on 2 partitions (data on disk, then on tmpfs)"
for dir in /tmp /dev/shm; do
  for shards in 1 2; do
    echo "-- data under $dir, shards=$shards"
    TMPDIR=$dir LURCHER_SYSTEM_SHARDING_SHARDS=$shards $B pinned-producer -p 2 | grep -E "sum|server:"
  done
done

say "5. storage I/O and fsync: pinned-producer, 1 producer"
for io in posix uring; do
  for fsync in "" "--enforce-fsync"; do
    echo "-- system.io=$io ${fsync:-(no fsync)}"
    LURCHER_SYSTEM_IO=$io $B pinned-producer $fsync | grep -E "sum|server:"
  done
done

say "6. lurcher's SDK beside the official apache-iggy client (same server, same workload)"
for target in lurcher iggy-py; do
  for workload in pinned-producer pinned-consumer; do
    echo "-- $workload with $target"
    $B $workload --target $target | grep -E "sum|server:"
  done
done

say "7. transports: pinned-producer and pinned-consumer over each front end"
for transport in tcp ws quic http; do
  batches=1000; [ "$transport" = quic ] || [ "$transport" = http ] && batches=200
  for workload in pinned-producer pinned-consumer; do
    echo "-- $workload over $transport ($batches batches)"
    $B $workload --transport $transport --message-batches $batches | grep -E "sum|server:"
  done
done
