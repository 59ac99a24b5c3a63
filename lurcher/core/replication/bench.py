"""Throughput of the replication core alone (a benchmark, not a test).

``python -m lurcher.core.replication.bench [--seconds S]``: three replicas in one process,
a zero-latency network (a FIFO queue) and storage that completes at once; closed-loop
clients keep one request each outstanding. Reports client operations committed per second
with 1 and with 1,000 client operations per Prepare.
"""

from __future__ import annotations

import argparse
import time
from collections import deque

from lurcher.core.replication.journal import Format, Sync, Write, encode_record
from lurcher.core.replication.messages import Reply, Request
from lurcher.core.replication.replica import Config, Effects, Replica, Status
from lurcher.core.replication.sim.model import AppendLog

CLIENT_BASE = 1_000_000


class Cluster:
    def __init__(self, replicas: int, max_batch: int, pipeline: int) -> None:
        config = Config(replicas=replicas, max_batch=max_batch, pipeline=pipeline)
        self.replicas = [Replica(i, config, AppendLog(), nonce=i) for i in range(replicas)]
        self.queue: deque[tuple[int, object]] = deque()
        self.replies = 0
        fmt = [encode_record(Format(replicas))]
        for r in self.replicas:
            r.start()
            self._apply(r, r.on_loaded(fmt))

    def _apply(self, replica: Replica, fx: Effects) -> None:
        self.queue.extend(fx.sends)
        for reply in fx.replies:
            self.queue.append((reply.client, reply))
        for intent in fx.storage:
            if isinstance(intent, Write):
                self._apply(replica, replica.on_written(intent.pos))
            elif isinstance(intent, Sync):
                self._apply(replica, replica.on_synced(intent.upto))

    def primary(self) -> Replica:
        while True:
            for r in self.replicas:
                if r.status is Status.NORMAL and r.is_primary and not r.announcing:
                    return r
            if not self.drain():
                for r in self.replicas:
                    self._apply(r, r.on_tick())

    def drain(self, limit: int = 1 << 30) -> int:
        """Deliver up to ``limit`` queued messages; returns how many. Replies go to ``on_reply``."""
        delivered = 0
        queue, replicas = self.queue, self.replicas
        while queue and delivered < limit:
            to, msg = queue.popleft()
            delivered += 1
            if to >= CLIENT_BASE:
                self.on_reply(msg)
            else:
                self._apply(replicas[to], replicas[to].on_message(msg))
        return delivered

    def on_reply(self, reply: Reply) -> None:
        self.replies += 1
        self.queue.append((self.primary_index, Request(reply.client, reply.request + 1, b"m")))


def measure(ops_per_prepare: int, seconds: float) -> float:
    """Committed client ops/s; ``pipeline`` Prepares in flight, one request per client."""
    pipeline = 8
    cluster = Cluster(3, max_batch=ops_per_prepare, pipeline=pipeline)
    primary = cluster.primary()
    cluster.primary_index = primary.index
    for c in range(ops_per_prepare * pipeline):
        cluster.queue.append((primary.index, Request(CLIENT_BASE + c, 1, b"m")))
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        cluster.drain(limit=20_000)
        cluster._apply(primary, primary.on_tick())
    elapsed = time.perf_counter() - started
    return cluster.replies / elapsed


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m lurcher.core.replication.bench")
    p.add_argument("--seconds", type=float, default=3.0)
    args = p.parse_args(argv)
    for batch in (1, 1000):
        rate = measure(batch, args.seconds)
        print(f"{batch:>5} client op(s) per Prepare: {rate:,.0f} ops committed/s "
              f"({rate / batch:,.0f} Prepares/s), 3 replicas, zero-latency network")


if __name__ == "__main__":
    main()
